"""The values a verification produces: frozen dataclasses, gathered in a `_report.Report`."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

PASS, FAIL = "pass", "fail"
ERROR, WARNING = "error", "warning"
# A cause explains a failure (RNG not preserved, a closure rebound, state changed twice, no
# input grads); a symptom is a difference it explains (a gradient, the loss, a raised step).
CAUSE, SYMPTOM = "cause", "symptom"


class VerifyError(Exception):
    """The step could not be verified (exit 2): bad target, failing step, nothing to compare."""


class NoCheckpointingFound(VerifyError):
    """The configured step recomputed nothing in backward: there is no checkpointing to verify."""


class NoTrainingStep(VerifyError):
    """Script mode: the script ended or timed out before a training-mode forward."""


@dataclass(frozen=True)
class Finding:
    """One thing that differs (error) or deserves attention (warning).

    `subject` names the parameter, buffer, module or attribute concerned; `code` is the
    static rule the failure corresponds to, when one does. `role`: CAUSE, SYMPTOM or None
    (warnings, and failures that are neither); `explained_by` names the cause of a symptom
    (`CKPT033 rng`), filled in by `_ranking.rank_findings`.
    """

    severity: str
    code: str | None
    subject: str
    message: str
    rank: int | None = None  # distributed runs: the rank it was seen on (None: all, or gathered)
    role: str | None = None
    explained_by: str | None = None

    @property
    def label(self) -> str:
        """How a symptom refers to this finding: its code and subject."""
        return f"{self.code} {self.subject}" if self.code else self.subject

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "severity": self.severity,
            "code": self.code,
            "subject": self.subject,
            "message": self.message,
            "role": self.role,
            "explained_by": self.explained_by,
        }
        if self.rank is not None:
            payload["rank"] = self.rank
        return payload


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    source: str  # "exact (CPU float32)", "dtype defaults (bfloat16)", "--rtol/--atol"

    @property
    def exact(self) -> bool:
        return self.rtol == 0 and self.atol == 0

    def to_dict(self) -> dict[str, Any]:
        return {"rtol": self.rtol, "atol": self.atol, "exact": self.exact, "source": self.source}


@dataclass(frozen=True)
class LossComparison:
    source: str  # where the loss came from: "loss_fn", "output.loss", "random projection of ..."
    baseline: float
    checkpointed: float | None  # None when the checkpointed step raised
    abs_diff: float | None
    matches: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "baseline": json_number(self.baseline),
            "checkpointed": json_number(self.checkpointed),
            "abs_diff": json_number(self.abs_diff),
            "matches": self.matches,
        }


@dataclass(frozen=True)
class TensorMismatch:
    """A gradient or buffer that differs between the two runs.

    kind: "value", "shape", "missing_checkpointed" (None with checkpointing only),
    "missing_baseline" (None without checkpointing only).
    """

    name: str
    kind: str
    max_abs_diff: float | None
    max_rel_diff: float | None
    baseline: str
    checkpointed: str
    code: str | None = None
    module: str | None = None

    def to_dict(self) -> dict[str, Any]:
        payload = {
            "name": self.name,
            "kind": self.kind,
            "max_abs_diff": json_number(self.max_abs_diff),
            "max_rel_diff": json_number(self.max_rel_diff),
            "baseline": self.baseline,
            "checkpointed": self.checkpointed,
            "code": self.code,
        }
        if self.module is not None:
            payload["module"] = self.module
        return payload


@dataclass(frozen=True)
class GradientComparison:
    compared: int  # parameters (and input tensors) with a gradient on at least one side
    max_abs_diff: float
    max_rel_diff: float
    mismatched: tuple[TensorMismatch, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "compared": self.compared,
            "max_abs_diff": json_number(self.max_abs_diff),
            "max_rel_diff": json_number(self.max_rel_diff),
            "mismatched": [m.to_dict() for m in self.mismatched],
        }


@dataclass(frozen=True)
class BufferComparison:
    compared: int
    mismatched: tuple[TensorMismatch, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"compared": self.compared, "mismatched": [m.to_dict() for m in self.mismatched]}


@dataclass(frozen=True)
class AttributeChange:
    """A plain Python attribute of a module that ended the two steps with different values."""

    module: str
    attribute: str
    baseline: str
    checkpointed: str

    def to_dict(self) -> dict[str, Any]:
        return {"module": self.module, "attribute": self.attribute, "baseline": self.baseline, "checkpointed": self.checkpointed}


@dataclass(frozen=True)
class RngComparison:
    generators: tuple[str, ...]  # "cpu", "cuda:0", ...
    mismatched: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"compared": list(self.generators), "mismatched": list(self.mismatched)}


@dataclass(frozen=True)
class MemoryFigure:
    metric: str
    baseline_bytes: int
    checkpointed_bytes: int

    @property
    def saving(self) -> float:
        """The fraction of the baseline that checkpointing saved (negative: it costs more)."""
        if self.baseline_bytes <= 0:
            return 0.0
        return 1.0 - self.checkpointed_bytes / self.baseline_bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "baseline_bytes": self.baseline_bytes,
            "checkpointed_bytes": self.checkpointed_bytes,
            "saving": round(self.saving, 6),
        }


@dataclass(frozen=True)
class MemoryReport:
    """Activation bytes held between forward and backward, and (when measured) the peak."""

    activations: MemoryFigure
    peak: MemoryFigure | None

    def to_dict(self) -> dict[str, Any]:
        payload = self.activations.to_dict()
        payload["peak"] = self.peak.to_dict() if self.peak else None
        return payload


@dataclass(frozen=True)
class Timing:
    """Step times in seconds, one sample per timed step, taken in pairs (without, then with
    checkpointing) so that both steps of a pair see the same load on the machine.

    `baseline_s` / `checkpointed_s` are medians; the overhead is the median of the pairs'
    ratios, its range their interquartile range. When that range holds 1.0, the noise
    between steps exceeds the difference (`resolved` False) and no ratio is claimed.
    """

    baseline_samples: tuple[float, ...]
    checkpointed_samples: tuple[float, ...]

    @property
    def repeats(self) -> int:
        return len(self.baseline_samples)

    @property
    def baseline_s(self) -> float:
        return _median(self.baseline_samples)

    @property
    def checkpointed_s(self) -> float:
        return _median(self.checkpointed_samples)

    @property
    def ratios(self) -> tuple[float, ...]:
        return tuple(c / b for b, c in zip(self.baseline_samples, self.checkpointed_samples) if b > 0)

    @property
    def overhead(self) -> float:
        return _median(self.ratios) if self.ratios else math.inf

    @property
    def overhead_range(self) -> tuple[float, float] | None:
        return _quartiles(self.ratios) if self.ratios else None

    @property
    def resolved(self) -> bool:
        """Whether the difference between the two kinds of step stands out of their noise."""
        bounds = self.overhead_range
        return bounds is not None and not bounds[0] <= 1.0 <= bounds[1]

    @property
    def spread(self) -> tuple[float, float]:
        """Each kind's interquartile range relative to its median: the noise between steps."""
        return _relative_spread(self.baseline_samples), _relative_spread(self.checkpointed_samples)

    def to_dict(self) -> dict[str, Any]:
        bounds = self.overhead_range
        baseline_spread, checkpointed_spread = self.spread
        return {
            "baseline_s": round(self.baseline_s, 6),
            "checkpointed_s": round(self.checkpointed_s, 6),
            "overhead": json_number(round(self.overhead, 4) if math.isfinite(self.overhead) else self.overhead),
            "overhead_range": [round(bounds[0], 4), round(bounds[1], 4)] if bounds is not None else None,
            "resolved": self.resolved,
            "spread": {"baseline": round(baseline_spread, 4), "checkpointed": round(checkpointed_spread, 4)},
            "repeats": self.repeats,
            "samples": {
                "baseline": [round(t, 6) for t in self.baseline_samples],
                "checkpointed": [round(t, 6) for t in self.checkpointed_samples],
            },
        }


def _median(samples: tuple[float, ...]) -> float:
    return statistics.median(samples) if samples else 0.0


def _quartiles(samples: tuple[float, ...]) -> tuple[float, float]:
    if len(samples) < 2:
        return samples[0], samples[0]
    low, _, high = statistics.quantiles(samples, n=4, method="inclusive")
    return low, high


def _relative_spread(samples: tuple[float, ...]) -> float:
    if not samples or _median(samples) <= 0:
        return 0.0
    low, high = _quartiles(samples)
    return (high - low) / _median(samples)


@dataclass(frozen=True)
class Recomputation:
    """What the forward-pre-hook and the checkpoint internals saw.

    regions: checkpoint calls made during the step (seen while checkpointing was off);
    *_module_forwards: module forwards that ran inside backward (recomputation);
    checkpointed_region_recomputes: checkpointed functions re-run inside backward.
    """

    regions: int
    reentrant_regions: int
    baseline_module_forwards: int
    checkpointed_module_forwards: int
    checkpointed_region_recomputes: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "regions": self.regions,
            "reentrant_regions": self.reentrant_regions,
            "baseline_module_forwards_in_backward": self.baseline_module_forwards,
            "checkpointed_module_forwards_in_backward": self.checkpointed_module_forwards,
            "checkpointed_region_recomputes": self.checkpointed_region_recomputes,
        }


@dataclass(frozen=True)
class Series:
    """Bytes over one step, for the HTML chart; `boundary` is the index where backward starts."""

    label: str
    points: tuple[int, ...]
    boundary: int


@dataclass(frozen=True)
class Timelines:
    saved_baseline: Series
    saved_checkpointed: Series | None
    live_baseline: Series | None = None
    live_checkpointed: Series | None = None


def json_number(value: float | None) -> float | None:
    """JSON has no infinity or NaN: those become null."""
    if value is None or not math.isfinite(value):
        return None
    return value


# --- where checkpointing pays: the per-region profile ----------------------------------------


@dataclass(frozen=True)
class RegionCost:
    """One checkpointed region (the checkpoint calls of one module or function from one call
    site) as measured in the step: the activation bytes checkpointing it saves, the time its
    recomputation in backward costs (median over the checkpointed steps)."""

    name: str  # module path ('blocks.3') or function ('chunk_loss (train.py:36)')
    site: str  # file:line of the checkpoint call
    calls: int
    saved_bytes: int
    recompute_s: float
    costs_more_than_it_saves: bool = False

    @property
    def saved_bytes_per_ms(self) -> float | None:
        return self.saved_bytes / (self.recompute_s * 1000) if self.recompute_s > 0 else None

    def to_dict(self) -> dict[str, Any]:
        per_ms = self.saved_bytes_per_ms
        return {
            "name": self.name,
            "site": self.site,
            "calls": self.calls,
            "saved_bytes": self.saved_bytes,
            "recompute_s": round(self.recompute_s, 6),
            "saved_bytes_per_ms": round(per_ms, 1) if per_ms is not None else None,
            "costs_more_than_it_saves": self.costs_more_than_it_saves,
        }


@dataclass(frozen=True)
class BudgetPlan:
    """`--memory-budget`: the regions to checkpoint so that the activations held between
    forward and backward fit `budget_bytes`, at the least recompute time."""

    budget_bytes: int
    fits: bool
    checkpoint: tuple[str, ...]  # region names, in profile order
    held_bytes: int  # activations held with exactly those regions checkpointed
    recompute_s: float
    method: str  # "exact" (every subset) or "greedy" (by bytes saved per ms)

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_bytes": self.budget_bytes,
            "fits": self.fits,
            "checkpoint": list(self.checkpoint),
            "held_bytes": self.held_bytes,
            "recompute_s": round(self.recompute_s, 6),
            "method": self.method,
        }
