"""What the registry records of a rule without importing it."""

from __future__ import annotations

from dataclasses import dataclass

from ckptlint.types import Applicability, Severity, rule_docs_url


@dataclass(frozen=True)
class RuleSummary:
    """What a run needs to know of a rule before (or without) importing it."""

    code: str
    name: str
    uses_project: bool  # reads the project index
    fix: Applicability | None
    severity: Severity

    def url(self) -> str:
        return rule_docs_url(self.code)
