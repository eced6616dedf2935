"""reviewdog's Diagnostic Format (rdjson; Ruff's `rdjson`): one result with a diagnostic per
finding, fixes as suggestions. Columns count UTF-8 bytes, as the format defines them."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ckptlint.reporters import ReportContext
from ckptlint.reporters.json_format import absolute_filename
from ckptlint.source import LineIndex
from ckptlint.types import REPOSITORY_URL, Diagnostic, Location, Severity

# rdjson's levels; the result's own `severity` is the default for diagnostics without one
# (every ckptlint diagnostic has one).
SEVERITIES = {Severity.ERROR: "ERROR", Severity.WARNING: "WARNING", Severity.INFO: "INFO"}
SEVERITY = "ERROR"


def _position(location: Location, lines: list[str] | None) -> dict:
    column = location.column
    if lines is not None and 0 < location.row <= len(lines):
        column = len(lines[location.row - 1][: location.column - 1].encode("utf-8", "surrogatepass")) + 1
    return {"line": location.row, "column": column}


def _range(start: Location, end: Location, lines: list[str] | None) -> dict:
    return {"start": _position(start, lines), "end": _position(end, lines)}


def render(diagnostics: Sequence[Diagnostic], *, not_shown: str = "", context: ReportContext = ReportContext()) -> str:
    """No place for `not_shown` (the CLI says it on stderr)."""
    items = []
    for d in diagnostics:
        item: dict = {"message": d.message, "location": {"path": absolute_filename(d.path)}}
        if d.cell is not None:
            # A notebook's rows are its cell's, not the .ipynb file's: no range to point at.
            item["message"] = f"cell {d.cell}, line {d.location.row}, column {d.location.column}: {d.message}"
        else:
            source = context.source(d)
            lines = LineIndex(source).lines() if source is not None else None
            item["location"]["range"] = _range(d.location, d.end_location, lines)
            if d.fix is not None:
                item["suggestions"] = [
                    {"range": _range(e.location, e.end_location, lines), "text": e.content} for e in d.fix.edits
                ]
        item["severity"] = SEVERITIES[d.severity]
        item["code"] = {"value": d.code, "url": d.url} if d.url else {"value": d.code}
        items.append(item)
    result = {
        "source": {"name": "ckptlint", "url": REPOSITORY_URL},
        "severity": SEVERITY,
        "diagnostics": items,
    }
    return json.dumps(result, indent=2, ensure_ascii=False) + "\n"
