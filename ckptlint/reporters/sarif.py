"""SARIF 2.1.0 for code scanning (GitHub, GitLab, Azure DevOps), fixes included."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import quote

from ckptlint import __version__
from ckptlint.registry import all_rules
from ckptlint.reporters import ReportContext
from ckptlint.rule_codes import ENGINE_CODES
from ckptlint.types import REPOSITORY_URL, Diagnostic, Edit, Severity

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = REPOSITORY_URL


def _uri(path: str) -> str:
    absolute = Path(os.path.abspath(path))
    try:
        relative = absolute.relative_to(Path.cwd())
        return quote(relative.as_posix())
    except ValueError:
        return absolute.as_uri()


# SARIF 2.1.0 §3.27.10: `note` is the level for advice.
SARIF_LEVELS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _region(start, end) -> dict:
    return {"startLine": start.row, "startColumn": start.column, "endLine": end.row, "endColumn": end.column}


def _rule_descriptors() -> list[dict]:
    descriptors = []
    for rule in [*all_rules(), *ENGINE_CODES.values()]:
        documentation = rule.documentation()
        descriptors.append(
            {
                "id": rule.code,
                "name": rule.name,
                "shortDescription": {"text": rule.summary()},
                "fullDescription": {"text": rule.summary()},
                "helpUri": rule.url(),
                "help": {"text": documentation, "markdown": documentation},
                "defaultConfiguration": {"level": SARIF_LEVELS[rule.severity]},
                "properties": {
                    "fix": rule.fix.value if rule.fix else "none",
                    "targets": [str(t) for t in rule.targets],
                },
            }
        )
    return sorted(descriptors, key=lambda d: d["id"])


def _replacement(edit: Edit) -> dict:
    return {
        "deletedRegion": _region(edit.location, edit.end_location),
        "insertedContent": {"text": edit.content},
    }


def render(diagnostics: Sequence[Diagnostic], *, not_shown: str = "", context: ReportContext = ReportContext()) -> str:
    """The log of one run; `not_shown` (findings the target versions hide) is a note among
    the run's tool execution notifications."""
    rules = _rule_descriptors()
    index = {rule["id"]: i for i, rule in enumerate(rules)}
    results = []
    for d in diagnostics:
        result = {
            "ruleId": d.code,
            "ruleIndex": index.get(d.code, -1),
            "level": SARIF_LEVELS[d.severity],
            "message": {"text": d.message},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": _uri(d.path)},
                        "region": _region(d.location, d.end_location),
                    }
                }
            ],
        }
        if d.cell is not None:
            # In a notebook the region is in the cell (as in the JSON output), which the
            # result names: as a logical location and as the property `cell`.
            result["locations"][0]["logicalLocations"] = [
                {"name": f"cell {d.cell}", "fullyQualifiedName": f"{d.path}:cell {d.cell}", "kind": "module"}
            ]
            result["properties"] = {"cell": d.cell}
        if d.fix is not None:
            result["fixes"] = [
                {
                    "description": {"text": f"{d.fix.message} ({d.fix.applicability.value})"},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": _uri(d.path)},
                            "replacements": [_replacement(e) for e in d.fix.edits],
                        }
                    ],
                }
            ]
        results.append(result)
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "ckptlint",
                        "version": __version__,
                        "semanticVersion": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": rules,
                    }
                },
                "columnKind": "unicodeCodePoints",
                "results": results,
            }
        ],
    }
    if not_shown:
        log["runs"][0]["invocations"] = [
            {
                "executionSuccessful": True,
                "toolExecutionNotifications": [
                    {"level": "note", "descriptor": {"id": "not-shown"}, "message": {"text": not_shown}}
                ],
            }
        ]
    return json.dumps(log, indent=2, ensure_ascii=False) + "\n"
