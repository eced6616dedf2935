"""GitHub Actions workflow commands: one `::error`, `::warning` or `::notice` annotation per diagnostic (by its severity), its `file`
relative to the repository's root (GitHub places annotations by that path, whatever
directory the job ran ckptlint from)."""

from __future__ import annotations

from collections.abc import Sequence

from ckptlint.reporters import ReportContext, repository_path
from ckptlint.types import Diagnostic, Severity

# The annotation each severity is written as.
COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render(diagnostics: Sequence[Diagnostic], *, not_shown: str = "", context: ReportContext = ReportContext()) -> str:
    """`not_shown` (findings the target versions hide) becomes a `::notice` of the run."""
    root = str(context.repository_root) if context.repository_root else None
    lines = []
    for d in diagnostics:
        path = repository_path(d.path, root)
        if d.cell is not None:
            # A notebook's rows are rows of a cell, not of the .ipynb file GitHub would put a
            # line annotation on: the annotation is the file's, the cell and row in its text.
            where = f"cell {d.cell}, line {d.location.row}, column {d.location.column}"
            properties = ",".join(
                [f"title={_escape_property(f'ckptlint ({d.code}) in cell {d.cell}')}", f"file={_escape_property(path)}"]
            )
            lines.append(f"::{COMMANDS[d.severity]} {properties}::{_escape_data(f'{where}: {d.code} {d.message}')}")
            continue
        properties = ",".join(
            [
                f"title={_escape_property(f'ckptlint ({d.code})')}",
                f"file={_escape_property(path)}",
                f"line={d.location.row}",
                f"col={d.location.column}",
                f"endLine={d.end_location.row}",
                f"endColumn={d.end_location.column}",
            ]
        )
        lines.append(f"::{COMMANDS[d.severity]} {properties}::{_escape_data(f'{d.code} {d.message}')}")
    if not_shown:
        lines.append(f"::notice title={_escape_property('ckptlint')}::{_escape_data(not_shown)}")
    return "".join(line + "\n" for line in lines)
