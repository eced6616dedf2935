"""The outcome of one verification: the values it measured (`_types`, `_distributed_types`),
as JSON, text and an HTML page (`_render`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ckptlint.runtime_check._distributed_types import DistributedReport
from ckptlint.runtime_check._types import (
    CAUSE,
    ERROR,
    PASS,
    WARNING,
    AttributeChange,
    BudgetPlan,
    BufferComparison,
    Finding,
    GradientComparison,
    LossComparison,
    MemoryReport,
    Recomputation,
    RegionCost,
    RngComparison,
    Timelines,
    Timing,
    Tolerance,
)


@dataclass(frozen=True)
class Report:
    """The outcome of one verification; `verdict` is "pass" or "fail"."""

    verdict: str
    target: str
    model: str
    device: str
    dtype: str
    tolerance: Tolerance
    loss: LossComparison
    gradients: GradientComparison
    buffers: BufferComparison
    attributes: tuple[AttributeChange, ...]
    rng: RngComparison
    memory: MemoryReport
    time: Timing
    recomputation: Recomputation
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()
    duration_s: float = 0.0
    timelines: Timelines | None = field(default=None, compare=False, repr=False)
    distributed: DistributedReport | None = None  # set by `--nproc N` runs only
    regions: tuple[RegionCost, ...] = ()  # best bytes saved per ms of recompute first
    budget: BudgetPlan | None = None  # set when a memory budget was given

    @property
    def passed(self) -> bool:
        return self.verdict == PASS

    @property
    def exit_code(self) -> int:
        return 0 if self.passed else 1

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == ERROR)

    @property
    def causes(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.role == CAUSE)

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == WARNING)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "target": self.target,
            "model": self.model,
            "device": self.device,
            "dtype": self.dtype,
            "tolerance": self.tolerance.to_dict(),
            "loss": self.loss.to_dict(),
            "gradients": self.gradients.to_dict(),
            "buffers": self.buffers.to_dict(),
            "attributes": {"mismatched": [a.to_dict() for a in self.attributes]},
            "rng": self.rng.to_dict(),
            "memory": self.memory.to_dict(),
            "time": self.time.to_dict(),
            "recomputation": self.recomputation.to_dict(),
            "findings": [f.to_dict() for f in self.findings],
            "regions": [r.to_dict() for r in self.regions],
            **({"budget": self.budget.to_dict()} if self.budget is not None else {}),
            "notes": list(self.notes),
            "duration_s": round(self.duration_s, 3),
            **({"distributed": self.distributed.to_dict()} if self.distributed is not None else {}),
        }

    def to_json(self) -> str:
        import json

        return json.dumps(self.to_dict(), indent=2, allow_nan=False) + "\n"

    def to_text(self) -> str:
        from ckptlint.runtime_check._render import render_text

        return render_text(self)

    def to_html(self) -> str:
        from ckptlint.runtime_check._render import render_html

        return render_html(self)
