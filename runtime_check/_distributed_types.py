"""The values a distributed verification (`--nproc N`) adds to a report: FSDP unit
nesting, collectives per rank, each rank's status and the single-process reference."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ckptlint.runtime_check._types import GradientComparison, Tolerance, json_number


@dataclass(frozen=True)
class UnitNesting:
    """`count` wrapper chains read `pattern` (`CheckpointWrapper(FSDP(Block))`); `first`
    names the module where the first of them sits."""

    pattern: str
    count: int
    first: str

    def to_dict(self) -> dict[str, Any]:
        return {"pattern": self.pattern, "count": self.count, "first": self.first}


@dataclass(frozen=True)
class CollectiveComparison:
    """Calls of one kind of collective ("all_gather", "reduce_scatter", "all_reduce") in one
    phase of the step ("forward", "backward"), per rank, in both runs. `checkpointed` is None
    when the checkpointed step never got there; with `complete` False it counts up to the
    point where the step crashed or was stopped."""

    kind: str
    phase: str
    baseline: int
    checkpointed: int | None
    complete: bool = True

    @property
    def extra(self) -> int | None:
        return None if self.checkpointed is None else self.checkpointed - self.baseline

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "phase": self.phase,
            "baseline": self.baseline,
            "checkpointed": self.checkpointed,
            "extra": self.extra,
            "complete": self.complete,
        }


@dataclass(frozen=True)
class RankStatus:
    """How one rank ended. state: "finished", "crashed", "timed out" (stopped at --timeout),
    "stopped" (torn down after another rank failed), "lost" (ended without a word)."""

    rank: int
    state: str
    phase: str  # the last phase it reached
    error: str | None = None
    location: str | None = None  # the innermost frame of the user's code when it failed or was stopped
    parameter_bytes: int | None = None
    pid: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "state": self.state,
            "phase": self.phase,
            "error": self.error,
            "location": self.location,
            "parameter_bytes": self.parameter_bytes,
            "pid": self.pid,
        }


@dataclass(frozen=True)
class ReferenceComparison:
    """The gathered gradients against one process running the same model on the global batch
    (`make_case(0, 1)`, checkpointing off)."""

    source: str
    tolerance: Tolerance
    loss: float
    sharded_loss: float  # the mean of the ranks' losses, without checkpointing
    baseline: GradientComparison  # the sharded step without checkpointing vs the reference
    checkpointed: GradientComparison | None  # the sharded step as configured vs the reference

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "tolerance": self.tolerance.to_dict(),
            "loss": json_number(self.loss),
            "sharded_loss": json_number(self.sharded_loss),
            "baseline": self.baseline.to_dict(),
            "checkpointed": self.checkpointed.to_dict() if self.checkpointed else None,
        }


@dataclass(frozen=True)
class DistributedReport:
    """What `--nproc N` adds: how the ranks ran, how FSDP sharded the model, the collectives
    of both steps, and the single-process reference. outcome: "completed", "crashed",
    "timed out"."""

    world_size: int
    backend: str
    launcher: str
    outcome: str
    timeout_s: float
    fsdp: tuple[str, ...]  # "FSDP1", "FSDP2"
    units: int
    nesting: tuple[UnitNesting, ...]
    parameter_bytes_per_rank: tuple[int | None, ...]
    full_parameter_bytes: int
    collectives: tuple[CollectiveComparison, ...]
    ranks: tuple[RankStatus, ...]
    reference: ReferenceComparison | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "backend": self.backend,
            "launcher": self.launcher,
            "outcome": self.outcome,
            "timeout_s": self.timeout_s,
            "fsdp": list(self.fsdp),
            "units": self.units,
            "nesting": [n.to_dict() for n in self.nesting],
            "parameter_bytes_per_rank": list(self.parameter_bytes_per_rank),
            "full_parameter_bytes": self.full_parameter_bytes,
            "collectives": [c.to_dict() for c in self.collectives],
            "ranks": [r.to_dict() for r in self.ranks],
            "reference": self.reference.to_dict() if self.reference else None,
        }
