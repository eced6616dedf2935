"""Ruff's JSON schema (DESIGN.md, "Command line"): rows and columns 1-based, end exclusive."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from ckptlint.reporters import ReportContext
from ckptlint.types import Diagnostic, Location


def _location(location: Location) -> dict:
    return {"row": location.row, "column": location.column}


def absolute_filename(path: str) -> str:
    return path if path == "-" else os.path.abspath(path)


def diagnostic_to_json(diagnostic: Diagnostic) -> dict:
    fix = diagnostic.fix
    return {
        "code": diagnostic.code,
        "message": diagnostic.message,
        "filename": absolute_filename(diagnostic.path),
        "location": _location(diagnostic.location),
        "end_location": _location(diagnostic.end_location),
        "fix": None
        if fix is None
        else {
            "applicability": fix.applicability.value,
            "message": fix.message,
            "edits": [
                {
                    "content": edit.content,
                    "location": _location(edit.location),
                    "end_location": _location(edit.end_location),
                }
                for edit in fix.edits
            ],
        },
        "url": diagnostic.url,
        "noqa_row": diagnostic.noqa_row,
        # Ruff's key: in a notebook the 1-based cell (over all cells) the rows are in.
        "cell": diagnostic.cell,
        # ckptlint's own (Ruff has none): "error", "warning" or "info".
        "severity": diagnostic.severity.value,
    }


def render(diagnostics: Sequence[Diagnostic], *, not_shown: str = "", context: ReportContext = ReportContext()) -> str:
    """Ruff's list of diagnostics; it has no place for `not_shown` (the CLI says it on stderr)."""
    return json.dumps([diagnostic_to_json(d) for d in diagnostics], indent=2, ensure_ascii=False) + "\n"
