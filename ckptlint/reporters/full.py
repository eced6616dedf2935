"""Ruff's `full` output: each finding's line (`text`'s), then the source around it with a
caret under what is reported, the fix's title and the fix as a diff of the lines it
changes."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import click

from ckptlint.reporters import ReportContext
from ckptlint.reporters.text import render_diagnostics
from ckptlint.source import LineIndex
from ckptlint.types import Applicability, Diagnostic, Edit

CONTEXT_LINES = 2  # shown above and below the reported line, as Ruff shows them
TAB = "    "


def render(diagnostics: Sequence[Diagnostic], *, not_shown: str = "", context: ReportContext = ReportContext()) -> str:
    """One block per finding, a blank line after each; `not_shown` is the summary's."""
    blocks = []
    for d in diagnostics:
        lines = [render_diagnostics([d], unsafe_fixes=context.unsafe_fixes).rstrip("\n")]
        source = context.source(d)
        rows = LineIndex(source).lines() if source is not None else None
        if rows is not None and 0 < d.location.row <= len(rows):
            lines += _snippet(d, rows)
        if d.fix is not None:
            lines.append(f"  {_gutter('=')} help: {d.fix.message}")
            if source is not None:
                lines += ["", *_fix_diff(d, source)]
        blocks.append("\n".join(lines) + "\n\n")
    return "".join(blocks)


def _gutter(text: str) -> str:
    return click.style(text, fg="blue", bold=True)


def _snippet(d: Diagnostic, rows: list[str]) -> list[str]:
    first = max(d.location.row - CONTEXT_LINES, 1)
    last = min(d.location.row + CONTEXT_LINES, len(rows))
    while first < d.location.row and not rows[first - 1].strip():
        first += 1
    while last > d.location.row and not rows[last - 1].strip():
        last -= 1
    width = len(str(last))
    blank = " " * width
    out = [_gutter(f"{blank} |")]
    for row in range(first, last + 1):
        out.append(_gutter(f"{row:>{width}} |") + (" " + _shown(rows[row - 1]) if rows[row - 1].strip() else ""))
        if row == d.location.row:
            line = rows[row - 1].rstrip("\r\n")
            end = d.end_location.column if d.end_location.row == row else len(line) + 1
            start = len(_shown(line[: d.location.column - 1]))
            length = max(len(_shown(line[d.location.column - 1 : end - 1])), 1)
            out.append(_gutter(f"{blank} |") + " " + " " * start + click.style("^" * length + " " + d.code, fg="red", bold=True))
    out.append(_gutter(f"{blank} |"))
    return out


def _shown(line: str) -> str:
    return line.rstrip("\r\n").replace("\t", TAB)


def _fix_diff(d: Diagnostic, source: str) -> list[str]:
    """The lines the fix changes, with a line of context: old and new row numbers, `-`
    and `+` as in Ruff's fix diffs."""
    index = LineIndex(source)
    fixed = source
    for edit in sorted(d.fix.edits, key=lambda e: (e.location, e.end_location), reverse=True):
        fixed = _applied(fixed, index, edit)
    old, new = source.splitlines(), fixed.splitlines()
    label = "Safe fix" if d.fix.applicability is Applicability.SAFE else "Unsafe fix"
    out = [click.style(f"ℹ {label}", fg="cyan", bold=True)]
    width = len(str(max(len(old), len(new), 1)))
    blank = " " * width
    for group in difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(1):
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [_gutter(f"{i + 1:>{width}} {j + 1:>{width}} |") + " " + _shown(old[i]) for i, j in zip(range(i1, i2), range(j1, j2))]
                continue
            out += [_gutter(f"{i + 1:>{width}} {blank} |") + click.style(f"-{_shown(old[i])}", fg="red") for i in range(i1, i2)]
            out += [_gutter(f"{blank} {j + 1:>{width}} |") + click.style(f"+{_shown(new[j])}", fg="green") for j in range(j1, j2)]
    return out


def _applied(text: str, index: LineIndex, edit: Edit) -> str:
    start, end = index.offset(edit.location), index.offset(edit.end_location)
    return text[:start] + edit.content + text[end:]
