"""Turning checkpointing off, and seeing recomputation happen.

torch 2.13 has no switch for this (EVIDENCE Q7). Every checkpoint path goes through two
globals of `torch.utils.checkpoint` that `checkpoint()` looks up when called:
`CheckpointFunction` (reentrant) and `_checkpoint_without_reentrant_generator`
(non-reentrant). Replacing those two, and restoring them in `finally`, switches off plain
calls, names bound at import time, `checkpoint_sequential`, `checkpoint_wrapper` /
`apply_activation_checkpointing` and Hugging Face layers alike, while `checkpoint()`'s own
argument validation still runs. Replacing `checkpoint` itself would miss every
`from torch.utils.checkpoint import checkpoint`; HF `gradient_checkpointing_disable()`
removes PEFT input-grad hooks.

Recomputation is seen two ways: a global forward-pre-hook counts module forwards that run
while a backward graph task is active, and in the configured run the checkpointed function
is wrapped (transparently) to count its calls inside backward, which also covers regions
made of plain functions.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any, Callable, Iterator

import torch
import torch.utils.checkpoint as torch_checkpoint

from ckptlint.runtime_check._regions import RegionRecorder

_COMPOSABLE = "torch.distributed._composable.checkpoint_activation"
# Script mode: whether a checkpoint call of this function belongs to the step (and, for a
# call made before the step's first module forward, the step starts there).
Gate = Callable[[Callable[..., Any], tuple[Any, ...]], bool]
_GENERATOR = "_checkpoint_without_reentrant_generator"


def _in_backward() -> bool:
    return torch._C._current_graph_task_id() != -1


class _FunctionProxy:
    """Stands in for `CheckpointFunction`: our `apply`, everything else from the real class."""

    def __init__(self, real: type, apply: Callable[..., Any]) -> None:
        self._real = real
        self.apply = apply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@contextlib.contextmanager
def _replaced(apply: Callable[[type], Callable[..., Any]], generator: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    real_function = torch_checkpoint.CheckpointFunction
    real_generator = getattr(torch_checkpoint, _GENERATOR)
    # FSDP2's composable `checkpoint` imported the generator by name.
    homes = [torch_checkpoint]
    composable = sys.modules.get(_COMPOSABLE)
    if composable is not None and getattr(composable, _GENERATOR, None) is real_generator:
        homes.append(composable)
    torch_checkpoint.CheckpointFunction = _FunctionProxy(real_function, apply(real_function))
    replacement = generator(real_generator)
    for home in homes:
        setattr(home, _GENERATOR, replacement)
    try:
        yield
    finally:
        torch_checkpoint.CheckpointFunction = real_function
        for home in homes:
            setattr(home, _GENERATOR, real_generator)
        # A module imported while the patch was active (the profiler imports FSDP2's
        # composable checkpoint on first use) bound the replacement by name: give it back.
        composable = sys.modules.get(_COMPOSABLE)
        if composable is not None and getattr(composable, _GENERATOR, None) is replacement:
            setattr(composable, _GENERATOR, real_generator)


def checkpointing_disabled(recorder: RegionRecorder, gate: Gate | None = None) -> contextlib.AbstractContextManager[None]:
    """Run every checkpointed region as a plain call; report each call to `recorder` (only
    the calls `gate(function, args)` admits to the step, when there is a gate)."""

    def apply(_real: type) -> Callable[..., Any]:
        def call_directly(function: Callable[..., Any], preserve_rng_state: bool, *args: Any) -> Any:
            if gate is not None and not gate(function, args):
                return function(*args)
            call = recorder.record("reentrant", function, preserve_rng_state, args, {})
            output = function(*args)
            recorder.after_call(call)
            return output

        return call_directly

    def generator(_real: Callable[..., Any]) -> Callable[..., Any]:
        def run_without_checkpoint(
            fn: Callable[..., Any],
            preserve_rng_state: bool = True,
            context_fn: Callable[[], Any] = torch_checkpoint.noop_context_fn,
            determinism_check: str = "default",
            debug: bool = False,
            early_stop: bool = True,
            *args: Any,
            **kwargs: Any,
        ) -> Iterator[None]:
            if gate is not None and not gate(fn, args):
                yield
                return
            call = recorder.record("non-reentrant", fn, preserve_rng_state, args, kwargs)
            forward_context: Any = contextlib.nullcontext()
            if context_fn is not torch_checkpoint.noop_context_fn and not debug:
                candidate, _ = context_fn()
                # A user's forward context (autocast, ...) shapes the forward: keep it. The
                # selective-checkpointing cache only stores tensors for a recompute that
                # will not come.
                if not isinstance(candidate, getattr(torch_checkpoint, "_CachingTorchDispatchMode", ())):
                    forward_context = candidate
            with forward_context:
                yield
            recorder.after_call(call)

        return run_without_checkpoint

    return _replaced(apply, generator)


class RegionRecomputes:
    """Counts calls of checkpointed functions made inside backward (the configured run), and
    times each: `seconds[i]` is what recomputing the step's i-th checkpoint call took (on
    CUDA measured by CUDA events, read once the step is over)."""

    def __init__(self, device: torch.device | None = None) -> None:
        self.count = 0
        self.reentrant_without_grad_inputs = 0  # their output needs no grad: never recomputed
        self.cuda = device is not None and device.type == "cuda"
        self._spans: list[tuple[int, Any, Any]] = []
        self._wrapped = 0

    def wrap(self, function: Callable[..., Any]) -> Callable[..., Any]:
        index = self._wrapped
        self._wrapped += 1

        def recomputable(*args: Any, **kwargs: Any) -> Any:
            if not _in_backward():
                return function(*args, **kwargs)
            self.count += 1
            started = self._mark()
            try:
                return function(*args, **kwargs)
            finally:  # non-reentrant recomputation may stop early by raising
                self._spans.append((index, started, self._mark()))

        return recomputable

    def _mark(self) -> Any:
        if self.cuda:
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def seconds(self) -> dict[int, float]:
        if self.cuda and self._spans:
            torch.cuda.synchronize()
        found: dict[int, float] = {}
        for index, started, ended in self._spans:
            spent = started.elapsed_time(ended) / 1000.0 if self.cuda else ended - started
            found[index] = found.get(index, 0.0) + spent
        return found


def checkpointing_counted(recomputes: RegionRecomputes, gate: Gate | None = None) -> contextlib.AbstractContextManager[None]:
    """Checkpointing as configured, with each region's function counted when recomputed
    (only the calls `gate(function, args)` admits to the step, when there is a gate)."""

    def apply(real: type) -> Callable[..., Any]:
        def counted_apply(function: Callable[..., Any], preserve_rng_state: bool, *args: Any) -> Any:
            if gate is not None and not gate(function, args):
                return real.apply(function, preserve_rng_state, *args)
            if torch.is_grad_enabled() and not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
                recomputes.reentrant_without_grad_inputs += 1
            return real.apply(recomputes.wrap(function), preserve_rng_state, *args)

        return counted_apply

    def generator(real: Callable[..., Any]) -> Callable[..., Any]:
        def counted_generator(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Iterator[None]:
            if gate is not None and not gate(fn, args):
                return (yield from real(fn, *args, **kwargs))
            return (yield from real(recomputes.wrap(fn), *args, **kwargs))

        return counted_generator

    return _replaced(apply, generator)


class ModuleRecomputes:
    """A global forward-pre-hook counting module forwards that run inside backward."""

    def __init__(self) -> None:
        self.count = 0
        self._handle: Any = None

    def _hook(self, module: torch.nn.Module, args: Any) -> None:
        if _in_backward():
            self.count += 1

    def __enter__(self) -> "ModuleRecomputes":
        self._handle = torch.nn.modules.module.register_module_forward_pre_hook(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.remove()
