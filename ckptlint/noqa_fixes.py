"""Edits to `# noqa` comments: the unused-suppression report (CKPT100, Ruff's RUF100) with its
fix, and `--add-noqa` (a directive for every finding left). Text in, values out."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from ckptlint.source import LineIndex
from ckptlint.suppression import NoqaDirective, WrittenCode, noqa_directives, rows_that_take_a_comment
from ckptlint.types import Applicability, Diagnostic, Edit, Fix, Location, Severity

UNUSED_NOQA_CODE = "CKPT100"
# Codes ckptlint judges in a directive; other tools' (`E501`, `F401`) are theirs to judge.
OUR_PREFIX = "CKPT"
# A bare `# noqa` suppresses every finding of the line, the unused-suppression report included.
ANY_CODE = "*"


def unused_noqa(
    text: str,
    display: str,
    used: Collection[tuple[int, str]],
    judged: Collection[str],
    known: Collection[str],
    url: str | None,
) -> list[Diagnostic]:
    """A CKPT100 finding for each `# noqa` directive of Python `text` that names a ckptlint
    code suppressing nothing on its line: a code `judged` (its rule ran on this file) with
    no finding there (`used`: the (row, code) pairs a directive suppressed), a code
    `known` does not hold, or a code named twice. Codes of rules that did not run (not
    selected, ruled out by the target versions) are not judged: another run may need them."""
    directives = noqa_directives(text)
    if not directives:
        return []
    index = LineIndex(text)
    quiet_rows = {
        d.row for d in directives if d.bare or any(c.code.upper() == UNUSED_NOQA_CODE for c in d.codes)
    }
    found = []
    for directive in directives:
        if directive.row in quiet_rows:
            continue
        reasons: dict[str, list[str]] = {"unused": [], "unknown": [], "duplicated": []}
        removed: set[int] = set()
        seen: set[str] = set()
        for position, written in enumerate(directive.codes):
            code = written.code.upper()
            if not code.startswith(OUR_PREFIX):
                seen.add(code)
                continue
            reason = (
                "duplicated" if code in seen
                else "unknown" if code not in known
                else "unused" if code in judged and (directive.row, code) not in used
                else None
            )
            seen.add(code)
            if reason is not None:
                reasons[reason].append(written.code)
                removed.add(position)
        if not removed:
            continue
        line = index.line(directive.row).rstrip("\r\n")
        named = "; ".join(f"{kind}: {', '.join(f'`{c}`' for c in codes)}" for kind, codes in reasons.items() if codes)
        kept = [c for i, c in enumerate(directive.codes) if i not in removed]
        found.append(
            Diagnostic(
                code=UNUSED_NOQA_CODE,
                message=f"unused `noqa` directive ({named}): "
                + ("it suppresses" if len(removed) == 1 else "they suppress")
                + " no finding on this line; remove "
                + ("it" if len(removed) == 1 else "them"),
                path=display,
                location=Location(directive.row, directive.start + 1),
                end_location=Location(directive.row, directive.end + 1),
                fix=Fix(
                    Applicability.SAFE,
                    "remove the unused `noqa` directive" if not kept else "remove the unused codes from the `noqa` directive",
                    (_removal(directive, kept, line),),
                ),
                noqa_row=directive.row,
                url=url,
                severity=Severity.INFO,  # rule_codes.UNUSED_NOQA's
            )
        )
    return found


def _removal(directive: NoqaDirective, kept: list[WrittenCode], line: str) -> Edit:
    """The edit that leaves only `kept` in the directive, or removes the directive with the
    blanks that set it apart (other comments on the line stay)."""
    row = directive.row
    if kept:
        first, last = directive.codes[0], directive.codes[-1]
        return Edit(Location(row, first.start + 1), Location(row, last.end + 1), ", ".join(c.code for c in kept))
    before, after = line[: directive.start], line[directive.end :]
    if not after.strip():  # the directive ends the line: from the end of what precedes it
        return Edit(Location(row, len(before.rstrip()) + 1), Location(row, len(line) + 1), "")
    if after.lstrip().startswith("#"):  # `# noqa: X  # why`: the next comment takes its place
        return Edit(Location(row, directive.start + 1), Location(row, len(line) - len(after.lstrip()) + 1), "")
    if directive.start == directive.comment_start:  # `# noqa: X reason` keeps `# reason`
        return Edit(Location(row, directive.start + 2), Location(row, directive.end + 1), "")
    return Edit(Location(row, len(before.rstrip()) + 1), Location(row, directive.end + 1), "")


@dataclass(frozen=True)
class AddedNoqa:
    """`--add-noqa` on one text: the new text, how many lines got or extended a directive,
    and the rows of findings no directive could be added for."""

    text: str
    added: int
    left: tuple[int, ...] = ()


def with_noqa_added(text: str, diagnostics: Iterable[Diagnostic], not_suppressible: Collection[str]) -> AddedNoqa:
    """`text` with `# noqa: CODE` on each line a finding is reported on (its `noqa_row`),
    merged into the line's `# noqa` directive when it has one (`# noqa: E501` becomes
    `# noqa: E501, CKPT001`). A row inside a multi-line string or ending in a line
    continuation takes no comment: left as it is, and said."""
    by_row: dict[int, set[str]] = {}
    for diagnostic in diagnostics:
        if diagnostic.code in not_suppressible:
            continue
        by_row.setdefault(diagnostic.noqa_row or diagnostic.location.row, set()).add(diagnostic.code)
    if not by_row:
        return AddedNoqa(text, 0)
    directives = noqa_directives(text)
    open_rows = rows_that_take_a_comment(text)
    if directives is None or open_rows is None:
        return AddedNoqa(text, 0, tuple(sorted(by_row)))
    last_directive = {d.row: d for d in directives}  # the line's last directive gets the codes
    index = LineIndex(text)
    edits: list[tuple[int, int, str]] = []
    left = []
    for row, codes in sorted(by_row.items()):
        directive = last_directive.get(row)
        if directive is not None:
            if directive.bare:
                continue  # suppresses every code already
            named = {c.code.upper() for c in directive.codes}
            missing = sorted(codes - named)
            if missing:
                at = index.offset(Location(row, directive.end + 1))
                edits.append((at, at, "".join(f", {code}" for code in missing)))
            continue
        if row not in open_rows:
            left.append(row)
            continue
        line = index.line(row).rstrip("\r\n")
        content = line.rstrip(" \t")
        start = index.offset(Location(row, len(content) + 1))
        end = index.offset(Location(row, len(line) + 1))
        separator = "  " if content.strip() else ""
        edits.append((start, end, f"{separator}# noqa: {', '.join(sorted(codes))}"))
    for start, end, content in sorted(edits, reverse=True):
        text = text[:start] + content + text[end:]
    return AddedNoqa(text, len(edits), tuple(left))
