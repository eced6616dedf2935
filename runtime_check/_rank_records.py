"""What a rank of a distributed verification hands to the parent: frozen values, pickled
into the run directory (`_journal`). Kept apart from the code that computes them, so that
the parent reads them without importing FSDP."""

from __future__ import annotations

import math
from dataclasses import dataclass

from ckptlint.runtime_check._collectives import CollectiveTally
from ckptlint.runtime_check._types import (
    AttributeChange,
    BufferComparison,
    Finding,
    GradientComparison,
    LossComparison,
    MemoryReport,
    Recomputation,
    RngComparison,
    Tolerance,
)
from ckptlint.runtime_check._distributed_types import UnitNesting


@dataclass(frozen=True)
class ShardingStructure:
    """One rank's view of the sharded model."""

    model: str  # the user's class, under the wrappers
    device: str
    dtype: str
    versions: tuple[str, ...]  # "FSDP1", "FSDP2"
    units: int
    nesting: tuple[UnitNesting, ...]
    parameter_bytes: int  # held by this rank (its shards, plus unsharded parameters)
    full_parameter_bytes: int  # the whole model's parameters
    wrappers_outside_fsdp1_units: tuple[str, ...]  # where CheckpointWrapper(FSDP(...)) sits


@dataclass(frozen=True)
class RegionSites:
    """Where the baseline's checkpoint calls ran, relative to the FSDP1 units."""

    calls: int
    reentrant: int
    reentrant_around_fsdp1_units: tuple[str, ...]  # a reentrant region runs the whole unit
    reentrant_inside_fsdp1_units: tuple[tuple[str, int], ...]  # (unit, reentrant regions strictly inside)

    @property
    def crowded_units(self) -> tuple[tuple[str, int], ...]:
        """FSDP1 units holding several reentrant regions (EVIDENCE Q5: backward crashes)."""
        return tuple((unit, count) for unit, count in self.reentrant_inside_fsdp1_units if count >= 2)


@dataclass(frozen=True)
class BaselineRecord:
    """What a rank knows once its step without checkpointing is done (for crash reports)."""

    loss: float
    loss_source: str
    collectives: CollectiveTally
    sites: RegionSites


@dataclass(frozen=True)
class RankOutcome:
    """Everything one rank measured; the parent merges the ranks' outcomes into one Report."""

    rank: int
    model: str
    device: str
    dtype: str
    loss: LossComparison  # this rank's local loss
    baseline: BaselineRecord
    checkpointed_collectives: CollectiveTally
    recomputation: Recomputation
    buffers: BufferComparison
    attributes: tuple[AttributeChange, ...]
    rng: RngComparison
    memory: MemoryReport
    baseline_samples: tuple[float, ...]  # each timed step, in pairs with the next field's
    checkpointed_samples: tuple[float, ...]
    findings: tuple[Finding, ...]  # this rank's: loss, buffers, attributes, RNG (tagged with the rank)
    notes: tuple[str, ...]
    # rank 0 only: the gathered gradients compared
    tolerance: Tolerance | None = None
    gradients: GradientComparison | None = None
    gradient_findings: tuple[Finding, ...] = ()
    reference_baseline: GradientComparison | None = None
    reference_checkpointed: GradientComparison | None = None
    reference_loss: float | None = None
    reference_tolerance: Tolerance | None = None


def mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0
