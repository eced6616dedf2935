"""GitLab Code Quality (a JSON list of issues; Ruff's `gitlab`): `check_name` the code,
`description` code and message, `fingerprint` stable across line moves, `location.path`
relative to the repository root (`CI_PROJECT_DIR` in a GitLab job)."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from collections.abc import Sequence

from ckptlint.reporters import ReportContext, repository_path
from ckptlint.types import Diagnostic, Severity

# GitLab's levels are info, minor, major, critical and blocker: an error is "major" (as Ruff
# reports every finding), a cost or an implicit default "minor".
SEVERITIES = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.INFO: "info"}


def render(diagnostics: Sequence[Diagnostic], *, not_shown: str = "", context: ReportContext = ReportContext()) -> str:
    """No place for `not_shown` (the CLI says it on stderr)."""
    root = os.environ.get("CI_PROJECT_DIR") or (str(context.repository_root) if context.repository_root else None)
    seen: Counter[tuple[str, str, str]] = Counter()
    issues = []
    for d in diagnostics:
        path = repository_path(d.path, root)
        where = f"cell {d.cell}, line {d.location.row}: " if d.cell is not None else ""
        description = f"{d.code}: {where}{d.message}"
        key = (d.code, path, description)
        occurrence = seen[key]
        seen[key] += 1
        # Not the row: a finding keeps its fingerprint when lines above it move (GitLab
        # compares a merge request's issues with its base's by fingerprint).
        fingerprint = hashlib.sha256("\0".join([*key, str(occurrence)]).encode()).hexdigest()[:32]
        begin, end = (1, 1) if d.cell is not None else (d.location.row, d.end_location.row)
        issues.append(
            {
                "check_name": d.code,
                "description": description,
                "fingerprint": fingerprint,
                "severity": SEVERITIES[d.severity],
                "location": {"path": path, "lines": {"begin": begin, "end": end}},
            }
        )
    return json.dumps(issues, indent=2, ensure_ascii=False) + "\n"
