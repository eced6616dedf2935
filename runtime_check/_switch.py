"""Turning checkpointing off, and seeing recomputation happen.

torch has no switch for this (EVIDENCE Q7). Every checkpoint path goes through module
globals of `torch.utils.checkpoint` that `checkpoint()` looks up when called: an
`autograd.Function` (`CheckpointFunction`, reentrant) and a generator (non-reentrant:
`_checkpoint_without_reentrant_generator` up to torch 2.13, `_checkpoint_without_reentrant_
generator_impl`, with `args` and `kwargs` as two parameters, from 2.14). Which globals they
are is read off this torch's own code (`CheckpointInternals.of_this_torch`: the names
`checkpoint()` reaches), not assumed from one release, and a replacement binds each call to
the real function's signature. Replacing those globals wherever a module bound them (FSDP2's
composable `checkpoint` imports the generator by name), and restoring them in `finally`,
switches off plain calls, names bound at import time, `checkpoint_sequential`,
`checkpoint_wrapper` / `apply_activation_checkpointing` and Hugging Face layers alike, while
`checkpoint()`'s own argument validation still runs. Replacing `checkpoint` itself would miss
every `from torch.utils.checkpoint import checkpoint`; HF `gradient_checkpointing_disable()`
removes PEFT input-grad hooks.

Recomputation is seen two ways: a global forward-pre-hook counts module forwards that run
while a backward graph task is active (and remembers which code ran them: what could not be
switched off is named), and in the configured run the checkpointed function is wrapped
(transparently) to count its calls inside backward, which also covers regions made of plain
functions.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import sys
import time
import types
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch
import torch.utils.checkpoint as torch_checkpoint

from ckptlint.runtime_check._regions import RegionRecorder
from ckptlint.runtime_check._types import VerifyError

# Script mode: whether a checkpoint call of this function belongs to the step (and, for a
# call made before the step's first module forward, the step starts there).
Gate = Callable[[Callable[..., Any], tuple[Any, ...]], bool]


def in_backward() -> bool:
    """Whether this thread runs inside an autograd graph task (a backward)."""
    return torch._C._current_graph_task_id() != -1


@dataclass(frozen=True)
class CheckpointInternals:
    """The globals of `torch.utils.checkpoint` through which this torch checkpoints."""

    function_names: tuple[str, ...]  # autograd.Function subclasses: reentrant checkpointing
    generator_names: tuple[str, ...]  # generator functions: non-reentrant checkpointing

    @staticmethod
    def of_this_torch() -> "CheckpointInternals":
        """Follow `checkpoint()`'s code through the module's own functions to the Function
        and generator it runs; a torch whose checkpoint reaches neither cannot be switched off."""
        functions: list[str] = []
        generators: list[str] = []
        seen: set[str] = set()
        pending = [inspect.unwrap(f).__code__ for f in (torch_checkpoint.checkpoint, torch_checkpoint.checkpoint_sequential)]
        while pending:
            code = pending.pop()
            pending.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
            for name in code.co_names:
                if name in seen:
                    continue
                seen.add(name)
                value = vars(torch_checkpoint).get(name)
                if inspect.isfunction(value):
                    value = inspect.unwrap(value)  # torch._disable_dynamo's wrapper
                if inspect.isclass(value) and issubclass(value, torch.autograd.Function):
                    functions.append(name)
                elif inspect.isgeneratorfunction(value):
                    generators.append(name)
                elif inspect.isfunction(value) and value.__module__ == torch_checkpoint.__name__:
                    pending.append(value.__code__)
        missing = [kind for kind, names in (("reentrant", functions), ("non-reentrant", generators)) if not names]
        if missing:
            raise VerifyError(
                f"torch {torch.__version__}: torch.utils.checkpoint.checkpoint reaches no "
                + " and no ".join(
                    "autograd.Function (reentrant checkpointing)" if kind == "reentrant" else "generator (non-reentrant checkpointing)"
                    for kind in missing
                )
                + " that ckptlint knows how to switch off, so the step cannot be replayed without checkpointing; "
                f"{TESTED_TORCH_RELEASES}"
            )
        return CheckpointInternals(tuple(sorted(functions)), tuple(sorted(generators)))


# The releases `benchmarks/torch_releases.py` verified (keep pyproject's `runtime` extra equal).
TESTED_TORCH = ((2, 6), (2, 15))
TESTED_TORCH_RELEASES = f"ckptlint verify is tested on torch {TESTED_TORCH[0][0]}.{TESTED_TORCH[0][1]} to {TESTED_TORCH[1][0]}.{TESTED_TORCH[1][1]}"


def untested_torch_warning(version: str = torch.__version__) -> str | None:
    """A note when this torch is outside the releases the verifier was tested on."""
    try:
        release = tuple(int(part) for part in version.split("+")[0].split(".")[:2])
    except ValueError:
        return f"torch {version}: a version ckptlint cannot read; {TESTED_TORCH_RELEASES}"
    if TESTED_TORCH[0] <= release <= TESTED_TORCH[1]:
        return None
    return f"torch {version} is outside the releases this verifier was tested on ({TESTED_TORCH_RELEASES}): its verdicts are unchecked there"


class _FunctionProxy:
    """Stands in for `CheckpointFunction`: our `apply`, everything else from the real class."""

    def __init__(self, real: type, apply: Callable[..., Any]) -> None:
        self._real = real
        self.apply = apply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@dataclass(frozen=True)
class GeneratorCall:
    """One call of torch's non-reentrant generator, whichever signature this torch gives it."""

    signature: inspect.Signature
    bound: inspect.BoundArguments

    @staticmethod
    def of(real: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> "GeneratorCall":
        signature = inspect.signature(real)
        bound = signature.bind(*args, **kwargs)
        return GeneratorCall(signature, bound)

    @property
    def _first(self) -> str:
        return next(iter(self.signature.parameters))

    @property
    def function(self) -> Callable[..., Any]:
        return self.bound.arguments[self._first]

    def option(self, name: str) -> Any:
        if name in self.bound.arguments:
            return self.bound.arguments[name]
        parameter = self.signature.parameters.get(name)
        return parameter.default if parameter is not None else None

    @property
    def region_args(self) -> tuple[Any, ...]:  # `*args` before 2.14, a tuple parameter since
        return tuple(self.bound.arguments.get("args", ()))

    @property
    def region_kwargs(self) -> dict[str, Any]:
        return dict(self.bound.arguments.get("kwargs", {}))

    def with_function(self, function: Callable[..., Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        bound = self.signature.bind(*self.bound.args, **self.bound.kwargs)
        bound.arguments[self._first] = function
        return bound.args, bound.kwargs


def _homes(values: dict[int, Any]) -> list[tuple[types.ModuleType, str, Any]]:
    """Every (module, attribute) bound to one of `values` (by identity) in loaded modules."""
    found = []
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attribute, value in list(namespace.items()):
            if id(value) in values and values[id(value)] is value:
                found.append((module, attribute, value))
    return found


@contextlib.contextmanager
def _replaced(apply: Callable[[type], Callable[..., Any]], generator: Callable[[Callable[..., Any]], Callable[..., Any]]) -> Iterator[None]:
    internals = CheckpointInternals.of_this_torch()
    replacements: dict[int, Any] = {}
    real_by_id: dict[int, Any] = {}
    for name in internals.function_names:
        real = vars(torch_checkpoint)[name]
        real_by_id[id(real)] = real
        replacements[id(real)] = _FunctionProxy(real, apply(real))
    for name in internals.generator_names:
        real = vars(torch_checkpoint)[name]
        real_by_id[id(real)] = real
        replacements[id(real)] = generator(real)
    homes = _homes(real_by_id)
    for module, attribute, real in homes:
        setattr(module, attribute, replacements[id(real)])
    try:
        yield
    finally:
        for module, attribute, real in homes:
            setattr(module, attribute, real)
        # A module imported while the patch was active (the profiler imports FSDP2's
        # composable checkpoint on first use) bound a replacement by name: give it back.
        originals = {id(replacement): real_by_id[key] for key, replacement in replacements.items()}
        for module, attribute, replacement in _homes({id(r): r for r in replacements.values()}):
            setattr(module, attribute, originals[id(replacement)])


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

    def generator(real: Callable[..., Any]) -> Callable[..., Any]:
        def run_without_checkpoint(*args: Any, **kwargs: Any) -> Iterator[None]:
            bound = GeneratorCall.of(real, args, kwargs)
            fn, region_args = bound.function, bound.region_args
            if gate is not None and not gate(fn, region_args):
                yield
                return
            call = recorder.record("non-reentrant", fn, bound.option("preserve_rng_state"), region_args, bound.region_kwargs)
            forward_context: Any = contextlib.nullcontext()
            context_fn = bound.option("context_fn")
            if context_fn is not None and context_fn is not torch_checkpoint.noop_context_fn and not bound.option("debug"):
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

    return _watched(recorder, _replaced(apply, generator))


@contextlib.contextmanager
def _watched(recorder: RegionRecorder, switch: contextlib.AbstractContextManager[None]) -> Iterator[None]:
    with switch, recorder.watching_modules():
        yield


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
            if not in_backward():
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
        def counted_generator(*args: Any, **kwargs: Any) -> Iterator[None]:
            bound = GeneratorCall.of(real, args, kwargs)
            if gate is not None and not gate(bound.function, bound.region_args):
                return (yield from real(*args, **kwargs))
            args, kwargs = bound.with_function(recomputes.wrap(bound.function))
            return (yield from real(*args, **kwargs))

        return counted_generator

    return _replaced(apply, generator)


class ModuleRecomputes:
    """A global forward-pre-hook counting module forwards that run inside backward, and the
    code that ran the first of them (`origin`: what recomputed, named by its frame)."""

    def __init__(self) -> None:
        self.count = 0
        self.origin: str | None = None
        self._handle: Any = None

    def _hook(self, module: torch.nn.Module, args: Any) -> None:
        if in_backward():
            self.count += 1
            if self.origin is None:
                self.origin = _recomputing_frame(sys._getframe(1))

    def __enter__(self) -> "ModuleRecomputes":
        self._handle = torch.nn.modules.module.register_module_forward_pre_hook(self._hook)
        return self

    def __exit__(self, *exc: object) -> None:
        self._handle.remove()


_AUTOGRAD_ENTRY = os.path.join("torch", "autograd", "")
_MODULE_MACHINERY = os.path.join("torch", "nn", "modules", "module.py")


def _recomputing_frame(frame: types.FrameType | None) -> str:
    """The code the autograd engine called that ran this forward: the outermost Python
    frame of the backward (on CPU the engine runs under `loss.backward()`'s frames, which
    end at torch.autograd; on a device thread nothing is below it)."""
    outermost = None
    while frame is not None:
        caller = frame.f_back
        filename = frame.f_code.co_filename
        if not filename.endswith(_MODULE_MACHINERY):
            outermost = frame
        if caller is None or (_AUTOGRAD_ENTRY in caller.f_code.co_filename and _AUTOGRAD_ENTRY not in filename):
            break  # the engine called this frame (through torch.autograd's Function.apply or run_backward)
        frame = caller
    if outermost is None:
        return "an unknown caller"
    code = outermost.f_code
    filename = code.co_filename
    marker = os.sep + "site-packages" + os.sep
    shown = filename.split(marker, 1)[1] if marker in filename else os.path.basename(filename)
    return f"{getattr(code, 'co_qualname', code.co_name)} ({shown}:{outermost.f_lineno})"
