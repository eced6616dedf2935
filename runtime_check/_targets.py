"""What `ckptlint verify` can be pointed at: `file.py:make_case`, or an unmodified script.

Script mode (`verify_script`) verifies the script's own step, loss included: see `_script`.

Distributed script mode (`--nproc`, through `_rank`) still captures the first training
forward of a top-level module and replays the model on it: `_run_until_training_step`
runs the script as `__main__` with `torch.nn.Module.__call__` wrapped, and the wrapper
raises a private BaseException before that forward runs, which stops the script and leaves
parameters, buffers and RNG exactly as they were before the call.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import os
import runpy
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import torch

from ckptlint.runtime_check._step import StepInputs
from ckptlint.runtime_check._report import Report
from ckptlint.runtime_check._types import NoTrainingStep, VerifyError
from ckptlint.runtime_check._script import ScriptStep, ScriptTimedOut, _deadline, _trainable, _where, early_end
from ckptlint.runtime_check._verify import verify_replay, verify_step

DEFAULT_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class Target:
    path: Path
    attribute: str | None  # None: script mode

    @classmethod
    def parse(cls, text: str) -> "Target":
        head, colon, tail = text.rpartition(":")
        if colon and head and tail.isidentifier():
            return cls(Path(head), tail)
        return cls(Path(text), None)


def verify_target(text: str, script_args: tuple[str, ...] = (), *, timeout: float | None = DEFAULT_TIMEOUT_S, **options: Any) -> Report:
    """`ckptlint verify TARGET [-- ARGS]` as a function."""
    target = Target.parse(text)
    if target.attribute is not None:
        if script_args:
            raise VerifyError(f"script arguments ({' '.join(script_args)}) apply only to script mode, not to {text}")
        return verify_case(target.path, target.attribute, label=text, **options)
    return verify_script(target.path, script_args, timeout=timeout, label=text, **options)


# --- file.py:make_case ------------------------------------------------------------------------


def verify_case(path: str | os.PathLike[str], attribute: str = "make_case", *, label: str | None = None, **options: Any) -> Report:
    """Import `path`, call `attribute()` (or use it, if it is not callable) and verify the
    mapping or object it gives: `model`, `inputs`, optionally `loss_fn`."""
    path = Path(path)
    label = label or f"{path}:{attribute}"
    if not path.is_file():
        raise VerifyError(f"target not found: {path}")
    with _importable_from(path.resolve().parent):
        module = _import_file(path)
        if not hasattr(module, attribute):
            raise VerifyError(f"{path} defines no `{attribute}`")
        factory = getattr(module, attribute)
        try:
            case = factory() if callable(factory) else factory
        except Exception as error:
            raise VerifyError(f"{label}: {attribute}() raised {type(error).__name__}: {error}{_where(error)}") from error
        model, inputs, loss_fn = _field(case, "model"), _field(case, "inputs"), _field(case, "loss_fn")
        if model is None or inputs is None:
            missing = " and ".join(name for name, value in (("model", model), ("inputs", inputs)) if value is None)
            raise VerifyError(f"{label}: {attribute}() must return a mapping or object with `model` and `inputs` (no {missing})")
        if loss_fn is not None and not callable(loss_fn):
            raise VerifyError(f"{label}: `loss_fn` must be callable")
        return verify_step(model, StepInputs.from_inputs(inputs), loss_fn, target=label, **options)


def _field(case: Any, name: str) -> Any:
    if isinstance(case, Mapping):
        return case.get(name)
    return getattr(case, name, None)


def _import_file(path: Path) -> Any:
    resolved = path.resolve()
    digest = hashlib.sha1(str(resolved).encode()).hexdigest()[:10]
    name = f"_ckptlint_verify_{resolved.stem.replace('-', '_')}_{digest}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    if spec is None or spec.loader is None:
        raise VerifyError(f"cannot import {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        raise VerifyError(f"cannot import {path}: {type(error).__name__}: {error}{_where(error)}") from error
    return module


@contextlib.contextmanager
def _importable_from(directory: Path) -> Iterator[None]:
    saved = list(sys.path)
    sys.path.insert(0, str(directory))
    try:
        yield
    finally:
        sys.path[:] = saved


# --- script mode ------------------------------------------------------------------------------


class _StepCaptured(BaseException):
    def __init__(self, module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        super().__init__("ckptlint verify captured the training step")
        self.module, self.args, self.kwargs = module, args, kwargs
        # Unwinding the script leaves its `with torch.autocast(...)`: remember it for the replay.
        self.autocast = _autocast_state()


def _autocast_state() -> tuple[tuple[str, torch.dtype], ...]:
    active = []
    for device_type in ("cpu", "cuda"):
        try:
            if torch.is_autocast_enabled(device_type):
                active.append((device_type, torch.get_autocast_dtype(device_type)))
        except (RuntimeError, TypeError):  # a device type this build does not know
            continue
    return tuple(active)


def verify_script(
    path: str | os.PathLike[str],
    args: tuple[str, ...] | list[str] = (),
    *,
    timeout: float | None = DEFAULT_TIMEOUT_S,
    label: str | None = None,
    **options: Any,
) -> Report:
    """Run an unmodified training script up to its first training step, and verify that
    step: from its first training forward to the backward() after it (see `_script`)."""
    path = Path(path)
    label = label or str(path)
    if not path.is_file():
        raise VerifyError(f"target not found: {path}")
    notes: list[str] = []
    step = ScriptStep(path, label, tuple(args), timeout, notes)
    return verify_replay(step, target=label, notes=notes, **options)


def _run_until_training_step(path: Path, label: str, timeout: float | None) -> _StepCaptured:
    what = "a forward of an nn.Module with trainable parameters, in training mode with grad enabled"
    first: list[_StepCaptured] = []
    failure: str | None = None
    try:
        with _capture_first_training_forward(first), _deadline(timeout):
            runpy.run_path(str(path), run_name="__main__")
    except _StepCaptured as captured:
        return captured
    except (ScriptTimedOut, SystemExit, Exception) as ending:
        failure = early_end(label, timeout, ending, what)
        failure = failure and failure + "; nothing to verify"
    if first:  # the script caught the capture (a bare `except:`) and went on; the step is still ours
        return first[0]
    raise NoTrainingStep(failure or f"{label} finished without training: it never ran {what}, so there is no step to verify")


@contextlib.contextmanager
def _capture_first_training_forward(first: list[_StepCaptured]) -> Iterator[None]:
    original = torch.nn.Module.__call__
    owner = os.getpid()  # forked DataLoader workers inherit the wrapper; only this process captures
    local = threading.local()

    def call(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        if first and os.getpid() == owner:
            raise first[0]  # captured already: no module runs again, so nothing moves on
        depth = getattr(local, "depth", 0)
        if depth == 0 and os.getpid() == owner and self.training and torch.is_grad_enabled() and _trainable(self):
            first.append(_StepCaptured(self, args, kwargs))
            raise first[0]
        local.depth = depth + 1
        try:
            return original(self, *args, **kwargs)
        finally:
            local.depth = depth

    torch.nn.Module.__call__ = call  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.__call__ = original  # type: ignore[method-assign]
