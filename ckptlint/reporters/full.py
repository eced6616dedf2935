"""Ruff's `full` output (as Ruff 0.17 prints it): each finding's code and message, where it
is, the source around it with a caret under what is reported, the fix's title and the fix
as a diff of the lines it changes (`-` the old line, `+` the new one, numbered as in the
fixed file), with a note when the fix is unsafe. A finding over several lines is underlined
on its first."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

import click

from ckptlint.reporters import ReportContext
from ckptlint.reporters.text import headline
from ckptlint.source import LineIndex
from ckptlint.types import Applicability, Diagnostic, Edit

CONTEXT_LINES = 2  # shown above and below the reported line, as Ruff shows them
TAB = "    "
UNSAFE_NOTE = "note: This is an unsafe fix and may change runtime behavior"


def render(diagnostics: Sequence[Diagnostic], *, not_shown: str = "", context: ReportContext = ReportContext()) -> str:
    """One block per finding, a blank line after each; `not_shown` is the summary's."""
    blocks = []
    for d in diagnostics:
        where = d.path if d.cell is None else f"{d.path}:cell {d.cell}"
        lines = [
            headline(d, unsafe_fixes=context.unsafe_fixes),
            f" {_gutter('-->')} {where}:{d.location.row}:{d.location.column}",
        ]
        source = context.source(d)
        rows = LineIndex(source).lines() if source is not None else None
        if rows is not None and 0 < d.location.row <= len(rows):
            lines += _snippet(d, rows)
        if d.fix is not None:
            lines.append(f"{click.style('help', fg='cyan', bold=True)}: {d.fix.message}")
            if source is not None:
                lines += _fix_diff(d, source)
            if d.fix.applicability is Applicability.UNSAFE:
                lines.append(UNSAFE_NOTE)
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
        out.append(_numbered(row, width, "|", rows[row - 1]))
        if row == d.location.row:
            line = rows[row - 1].rstrip("\r\n")
            end = d.end_location.column if d.end_location.row == row else len(line) + 1
            start = len(_shown(line[: d.location.column - 1]))
            length = max(len(_shown(line[d.location.column - 1 : end - 1])), 1)
            out.append(_gutter(f"{blank} |") + " " + " " * start + click.style("^" * length, fg="red", bold=True))
    if last > d.location.row:  # Ruff closes the snippet after lines below the caret
        out.append(_gutter(f"{blank} |"))
    return out


def _numbered(row: int | str, width: int, mark: str, text: str) -> str:
    shown = _shown(text)
    return _gutter(f"{row:>{width}} {mark}") + (" " + shown if shown.strip() else "")


def _shown(line: str) -> str:
    return line.rstrip("\r\n").replace("\t", TAB)


def _fix_diff(d: Diagnostic, source: str) -> list[str]:
    """The lines the fix changes with a line of context, numbered as in the fixed text (a
    removed line has no number)."""
    index = LineIndex(source)
    fixed = source
    for edit in sorted(d.fix.edits, key=lambda e: (e.location, e.end_location), reverse=True):
        fixed = _applied(fixed, index, edit)
    old, new = source.splitlines(), fixed.splitlines()
    groups = list(difflib.SequenceMatcher(None, old, new, autojunk=False).get_grouped_opcodes(1))
    if not groups:
        return []
    width = len(str(max(j2 for group in groups for _, _, _, _, j2 in group)))
    blank = " " * width
    out = [_gutter(f"{blank} |")]
    for group in groups:
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [_numbered(j + 1, width, "|", new[j]) for j in range(j1, j2)]
                continue
            out += [_gutter(blank) + click.style(f" - {_shown(old[i])}", fg="red") for i in range(i1, i2)]
            out += [_gutter(f"{j + 1:>{width}}") + click.style(f" + {_shown(new[j])}", fg="green") for j in range(j1, j2)]
    out.append(_gutter(f"{blank} |"))
    return out


def _applied(text: str, index: LineIndex, edit: Edit) -> str:
    start, end = index.offset(edit.location), index.offset(edit.end_location)
    return text[:start] + edit.content + text[end:]
