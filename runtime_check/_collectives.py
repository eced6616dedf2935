"""Counting the collectives a training step issues, by kind and by phase.

FSDP calls the `torch.distributed` functions by attribute at call time (`dist.all_gather(...)`
in FSDP1 on CPU, `dist.all_gather_single(...)` in FSDP1 on GPU and in FSDP2,
`dist.reduce_scatter_single(...)` in both; EVIDENCE Q5), so replacing those attributes, in
`torch.distributed` and in `distributed_c10d` where they live, sees every call. The older
names (`all_gather_into_tensor`, `_all_gather_base`, `reduce_scatter_tensor`, ...) forward to
the new ones; a call is counted once, at the outermost of them. Collectives issued through
`torch.distributed._functional_collectives` (DTensor redistribution) are not counted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE = "all_gather", "reduce_scatter", "all_reduce"
KINDS = (ALL_GATHER, REDUCE_SCATTER, ALL_REDUCE)
FORWARD, BACKWARD = "forward", "backward"
PHASES = (FORWARD, BACKWARD)

_FUNCTIONS = {
    ALL_GATHER: ("all_gather", "all_gather_single", "all_gather_into_tensor", "_all_gather_base", "all_gather_coalesced"),
    REDUCE_SCATTER: ("reduce_scatter", "reduce_scatter_single", "reduce_scatter_tensor", "_reduce_scatter_base"),
    ALL_REDUCE: ("all_reduce", "all_reduce_coalesced"),
}


@dataclass(frozen=True)
class CollectiveTally:
    """How many collectives of each kind one step issued in its forward and its backward."""

    counts: tuple[tuple[str, str, int], ...]  # (kind, phase, calls), every kind and phase

    @classmethod
    def of(cls, counts: dict[tuple[str, str], int]) -> "CollectiveTally":
        return cls(tuple((kind, phase, counts.get((kind, phase), 0)) for kind in KINDS for phase in PHASES))

    def get(self, kind: str, phase: str) -> int:
        for k, p, calls in self.counts:
            if k == kind and p == phase:
                return calls
        return 0

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {kind: {phase: self.get(kind, phase) for phase in PHASES} for kind in KINDS}


class CollectiveCounter:
    """While entered, counts calls of the collectives above; `phase` says where a call
    belongs ("forward", "backward", or None: not counted). Backward may run on autograd's
    device threads, so the phase is shared and the nesting depth is per thread."""

    def __init__(self) -> None:
        self.phase: str | None = None
        self._counts: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._originals: list[tuple[Any, str, Callable[..., Any]]] = []

    def reset(self) -> None:
        with self._lock:
            self._counts = {}

    def tally(self) -> CollectiveTally:
        with self._lock:
            return CollectiveTally.of(dict(self._counts))

    def _counted(self, kind: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(self._local, "depth", 0)
            phase = self.phase
            if depth == 0 and phase is not None:
                with self._lock:
                    self._counts[(kind, phase)] = self._counts.get((kind, phase), 0) + 1
            self._local.depth = depth + 1
            try:
                return function(*args, **kwargs)
            finally:
                self._local.depth = depth

        counted.__wrapped__ = function  # type: ignore[attr-defined]
        return counted

    def __enter__(self) -> "CollectiveCounter":
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d

        for kind, names in _FUNCTIONS.items():
            for name in names:
                function = getattr(c10d, name, None)
                if function is None:
                    continue
                replacement = self._counted(kind, function)
                for home in (c10d, dist):
                    if getattr(home, name, None) is function:
                        self._originals.append((home, name, function))
                        setattr(home, name, replacement)
        return self

    def __exit__(self, *exc: object) -> None:
        for home, name, function in reversed(self._originals):
            setattr(home, name, function)
        self._originals.clear()
