"""Findings in the order a reader needs them: the causes first, then what they explain.

A failing step usually shows one cause (preserve_rng_state=False, a closure over a loop
variable, a layer that updates its state twice, a reentrant region with no input that
requires grad) and many symptoms (every gradient it touched). Sorted by name, the cause
can sit below a dozen gradient lines, or past the text report's cut. Here the causes come
first, most explanatory first; then errors that are neither; then the symptoms, grouped
under their cause and each naming it; then the warnings.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable

from ckptlint.runtime_check._hazards import (
    CHECKPOINTED_BATCHNORM,
    INPUTS_WITHOUT_GRAD,
    REENTRANT_INPUTS_WITHOUT_GRAD,
    LATE_BINDING_CLOSURE,
    RNG_NOT_PRESERVED,
    STATEFUL_FORWARD,
    STATE_CHANGED_BEFORE_BACKWARD,
)
from ckptlint.runtime_check._types import CAUSE, ERROR, SYMPTOM, Finding

# RNG not preserved shifts every later random draw, so it explains most; a rebound closure
# or mutated state changes what a region computes; state updated twice and missing input
# grads are local to their modules.
CAUSE_PRIORITY = (
    RNG_NOT_PRESERVED,
    LATE_BINDING_CLOSURE,
    STATE_CHANGED_BEFORE_BACKWARD,
    CHECKPOINTED_BATCHNORM,
    STATEFUL_FORWARD,
    INPUTS_WITHOUT_GRAD,
    REENTRANT_INPUTS_WITHOUT_GRAD,
)


def _cause_order(finding: Finding) -> tuple[int, str]:
    code = finding.code or ""
    if code in CAUSE_PRIORITY:
        return CAUSE_PRIORITY.index(code), ""
    return len(CAUSE_PRIORITY), code or "~"  # other codes by code, then causes without one


def rank_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Causes, other errors, symptoms (each with `explained_by` set when a cause explains it),
    warnings; the order within each group is the order given, except causes by priority."""
    findings = list(findings)
    errors = [f for f in findings if f.severity == ERROR]
    causes = sorted((f for f in errors if f.role == CAUSE), key=_cause_order)
    others = [f for f in errors if f.role not in (CAUSE, SYMPTOM)]
    symptoms = [dataclasses.replace(f, explained_by=f.explained_by or _explaining(f, causes)) for f in errors if f.role == SYMPTOM]
    position = {cause.label: index for index, cause in enumerate(causes)}
    symptoms.sort(key=lambda f: position.get(f.explained_by or "", len(causes)))
    warnings = [f for f in findings if f.severity != ERROR]
    return tuple(causes + others + symptoms + warnings)


def _explaining(symptom: Finding, causes: list[Finding]) -> str | None:
    """The cause with the symptom's code, preferring the one in the module that holds the
    symptom's parameter (`blocks.0.calls` for `blocks.0.linear.weight`); for a symptom
    without a code, the only cause there is."""
    if symptom.code is None:
        return causes[0].label if len(causes) == 1 else None
    same = [c for c in causes if c.code == symptom.code]
    if not same:
        return None
    return max(same, key=lambda c: (_shared_module_depth(c.subject, symptom.subject), -same.index(c))).label


def _shared_module_depth(cause_subject: str, parameter: str) -> int:
    """How deep the cause's module (its subject, or the subject less its attribute) contains
    the parameter: 0 when it does not."""
    for module in (cause_subject, cause_subject.rpartition(".")[0]):
        if module and parameter.startswith(module + "."):
            return module.count(".") + 1
    return 0
