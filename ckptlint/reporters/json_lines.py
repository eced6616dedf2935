"""JSON Lines (Ruff's `json-lines`): one diagnostic per line, each as in the JSON output."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ckptlint.reporters import ReportContext
from ckptlint.reporters.json_format import diagnostic_to_json
from ckptlint.types import Diagnostic


def render(diagnostics: Sequence[Diagnostic], *, not_shown: str = "", context: ReportContext = ReportContext()) -> str:
    """No place for `not_shown` (the CLI says it on stderr)."""
    return "".join(json.dumps(diagnostic_to_json(d), ensure_ascii=False, separators=(",", ":")) + "\n" for d in diagnostics)
