"""Memory figures for one step (EVIDENCE Q6).

Activation memory: bytes of the tensors saved for backward that are still held when
backward starts, seen through `torch.autograd.graph.saved_tensors_hooks`; each storage
counted once, parameter and buffer storages left out. Exact, cheap, the same on CPU and GPU.
Inside a non-reentrant region checkpoint's own hooks take over, so only what it really keeps
(the region's inputs) is seen; reentrant regions save their inputs through
`save_for_backward`, seen likewise.

Peak: on CUDA `torch.cuda.max_memory_allocated` over the step; on CPU the peak of live
allocator bytes from `torch.profiler` memory events over forward and backward (RSS is noisy
and inherited across processes, so it is not used).
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Callable, Iterator

import torch

BACKWARD_MARKER = "ckptlint::backward"


class _Held:
    """What autograd stores instead of a saved tensor while the meter watches."""

    __slots__ = ("tensor", "key", "meter")

    def __init__(self, tensor: torch.Tensor, key: int, meter: "SavedTensorMeter") -> None:
        self.tensor = tensor
        self.key = key
        self.meter = meter

    def __del__(self) -> None:
        try:
            self.meter._release(self.key)
        except Exception:  # interpreter shutdown
            pass


class SavedTensorMeter:
    """Live bytes of tensors saved for backward, over one step."""

    def __init__(self, excluded_storages: set[int], region_of: Callable[[], tuple[int, frozenset[int]] | None] | None = None) -> None:
        self.excluded = excluded_storages
        self.region_of = region_of  # the checkpoint region running now (index, its input storages)
        self.held_by_region: dict[int, int] = {}  # at backward: bytes first saved inside each region
        self._live: dict[int, list[int]] = {}  # storage pointer -> [holders, bytes, region index or -1]
        self.alive = 0
        self.held_at_backward = 0
        self.points: list[int] = [0]
        self.boundary = 0
        self._hooks: Any = None

    def __enter__(self) -> "SavedTensorMeter":
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)

    def start_backward(self) -> None:
        self.held_at_backward = self.alive
        self.boundary = len(self.points) - 1
        held: dict[int, int] = {}
        for _, size, region in self._live.values():
            if region >= 0:
                held[region] = held.get(region, 0) + size
        self.held_by_region = held

    def _pack(self, tensor: torch.Tensor) -> Any:
        try:
            storage = tensor.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
        except (RuntimeError, NotImplementedError, TypeError):
            return tensor  # no plain storage (sparse, nested, fake): not counted
        if size == 0 or key in self.excluded:
            return tensor
        entry = self._live.get(key)
        if entry is None:
            running = self.region_of() if self.region_of is not None else None
            region = running[0] if running is not None and key not in running[1] else -1
            self._live[key] = [1, size, region]
            self.alive += size
            self.points.append(self.alive)
        else:
            entry[0] += 1
        return _Held(tensor, key, self)

    @staticmethod
    def _unpack(packed: Any) -> torch.Tensor:
        return packed.tensor if isinstance(packed, _Held) else packed

    def _release(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            del self._live[key]
            self.alive -= entry[1]
            self.points.append(self.alive)


class PeakMeter:
    """Peak bytes allocated over one step, above what was allocated when it started."""

    def __init__(self, device: torch.device, enabled: bool = True) -> None:
        self.device = device
        self.enabled = enabled
        self.metric = "cuda_max_memory_allocated" if device.type == "cuda" else "cpu_profiler_peak_live_bytes"
        self.peak: int | None = None
        self.points: list[int] = []
        self.boundary = 0
        self._profiler: Any = None
        self._start = 0

    def __enter__(self) -> "PeakMeter":
        if not self.enabled:
            return self
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
        elif self.device.type == "cpu":
            from torch.profiler import ProfilerActivity, profile

            self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            # torch warns once per process, on fd 2, when a block allocated before profiling
            # is freed during it (a script's autocast cache, for one): free one here, quietly.
            allocated_before = [torch.empty(64)]
            with _quiet_stderr():
                self._profiler.start()
                allocated_before.clear()
        return self

    def backward_marker(self) -> contextlib.AbstractContextManager[Any]:
        if self._profiler is None:
            return contextlib.nullcontext()
        return torch.profiler.record_function(BACKWARD_MARKER)

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if not self.enabled:
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak = max(0, torch.cuda.max_memory_allocated(self.device) - self._start)
        elif self._profiler is not None:
            with _quiet_stderr():
                self._profiler.stop()
            if exc_type is None:
                self._read_profile()
            self._profiler = None

    def _read_profile(self) -> None:
        results = getattr(self._profiler.profiler, "kineto_results", None)
        if results is None:
            return
        memory: list[tuple[int, int]] = []
        marker: int | None = None
        for event in results.events():
            name = event.name()
            if name == "[memory]" and event.device_type() == torch.autograd.DeviceType.CPU:
                memory.append((event.start_ns(), event.nbytes()))
            elif name == BACKWARD_MARKER and marker is None:
                marker = event.start_ns()
        memory.sort()
        live, points = 0, [0]
        boundary = None
        for start, size in memory:
            if boundary is None and marker is not None and start >= marker:
                boundary = len(points) - 1
            live += size
            points.append(live)
        self.points = points
        self.boundary = boundary if boundary is not None else len(points) - 1
        self.peak = max(points)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """The profiler's C++ side logs a line on start and stop to fd 2; keep the terminal clean."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
