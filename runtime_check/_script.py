"""Script mode: the step is the script's own, from its first training forward to the first
`backward()` after it, whatever runs in between (a loss computed outside the model, a
chunked cross-entropy under checkpoint, several modules).

A script cannot be paused and replayed, so each run re-runs it from the start (as
`__main__`, its arguments in `sys.argv`, its directory first on `sys.path`, every RNG
seeded the same way, compiled modules run eagerly) and stops it once that backward has run:

- checkpointing is switched off (or counted) for the whole run, through a gate that
  admits only the step's checkpoint calls;
- the first call of a top-level module (no other module forward running) that has
  trainable parameters, in training mode, with grad enabled, starts the step, and so does
  a checkpoint call made outside any module forward with grad enabled (`checkpoint(model,
  x)` in the script itself): the meters and the clock start there, so checkpoint calls
  anywhere after it are seen;
- the first `torch.autograd.backward` after that (what `loss.backward()` calls) is the
  step's loss: `on_backward` runs, then backward, then the run's outcome is taken and a
  private BaseException stops the script (`except Exception:` in the script does not catch
  it; a bare `except:` that does is met by the same exception at the next module call or
  backward).

Every run must start its step from the same parameters and inputs; a script that reads a
clock or an unseeded source is reported, not compared.
"""

from __future__ import annotations

import contextlib
import gc
import linecache
import os
import random
import runpy
import sys
import threading
import traceback
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import torch

from ckptlint.runtime_check._compare import RunOutcome
from ckptlint.runtime_check._journal import is_library_file
from ckptlint.runtime_check._regions import _owning_module
from ckptlint.runtime_check._eager import eager_module
from ckptlint.runtime_check._replay import NOT_WATCHED, StepClock, StepDefaults, StepWatch, outcome_of
from ckptlint.runtime_check._switch import in_backward
from ckptlint.runtime_check._types import NoTrainingStep, VerifyError

SEED = 20240611
TRAINING_FORWARD = "a forward of an nn.Module with trainable parameters, in training mode with grad enabled"


class _StepDone(BaseException):
    """Raised through the script once its step has run (or failed inside the step)."""


class ScriptTimedOut(BaseException):
    pass


class _Run:
    """One run of the script: where it is, and what its step left."""

    def __init__(self, owner: "ScriptStep", watch: StepWatch) -> None:
        self.owner = owner
        self.watch = watch
        self.local = threading.local()  # .depth: module forwards running in this thread
        self.stack: contextlib.ExitStack | None = None
        self.opened = False
        self.model: torch.nn.Module | None = None
        self.wrapper: torch.nn.Module | None = None  # what the script called: the model, or a wrapper of it
        self.others: list[torch.nn.Module] = []  # other top-level modules called in the step
        self.fingerprint: tuple[float, ...] = ()
        self.clock: StepClock | None = None
        self.outcome: RunOutcome | None = None
        self.failure: BaseException | None = None  # raised inside the step: the step's failure
        self.done = False
        # After the step: the script's next steps timed (`StepWatch.later_steps`), then stopped.
        self.later: list[float] = []
        self.later_clock: StepClock | None = None
        self.collector_was_enabled = True
        self.stopping = False

    @property
    def depth(self) -> int:
        return getattr(self.local, "depth", 0)

    def identify(self, model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """The step's model: its first training-mode forward, outside any other forward (the
        eager module inside a `torch.compile` or DDP wrapper, so that regions are named as the
        model names them; the first run says so)."""
        self.wrapper = model
        model = eager_module(model, self.owner.notes if self.owner.first_run else [])
        self.model = model
        self.fingerprint = _fingerprint(model, (args, kwargs))
        self.owner.started(model)

    def open(self, device: torch.device) -> None:
        """The step begins: the meters start watching, the clock runs."""
        if self.opened:
            return
        self.opened = True
        self.stack = contextlib.ExitStack()
        for context in self.watch.meters:
            self.stack.enter_context(context)
        self.clock = StepClock(device)
        self.clock.start()

    def admits(self, function: Callable[..., Any], args: tuple[Any, ...]) -> bool:
        """A checkpoint call belongs to the step once it is open; one made outside any module
        forward with grad enabled opens it (`checkpoint(model, x)` in the script itself)."""
        if self.done:
            return False
        if self.opened:
            return True
        if self.depth != 0 or not torch.is_grad_enabled():
            return False
        owner = _owning_module(function)
        if owner is not None and owner.training and _trainable(owner):
            self.identify(owner, args, {})
        self.open(_device_of(owner))
        return True

    def close(self, error: BaseException | None = None) -> None:
        if self.stack is not None:
            stack, self.stack = self.stack, None
            if error is None:
                stack.close()
            else:
                stack.__exit__(type(error), error, error.__traceback__)

    def backward(self, real: Callable[..., Any], tensors: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        loss = tensors[0] if isinstance(tensors, (tuple, list)) and tensors else tensors
        self.owner.loss_source = _loss_source(loss)
        if self.watch.on_backward is not None:
            self.watch.on_backward()
        with self.watch.backward_context() if self.watch.backward_context is not None else contextlib.nullcontext():
            real(tensors, *args, **kwargs)
        assert self.clock is not None
        self.clock.stop()
        if self.model is None:
            raise VerifyError(
                f"{self.owner.label} checkpoints a function and calls backward() without running any nn.Module with "
                "trainable parameters in between: there is no model whose gradients could be compared"
            )
        self.close()
        value = float(loss.detach().float().sum()) if isinstance(loss, torch.Tensor) else float("nan")
        modules = self.owner.step_modules(self.model, self.others)
        parameters = _unique_parameters(modules)
        self.outcome = outcome_of(value, parameters, [], modules)
        self.done = True
        self.stopping = self.watch.later_steps <= 0

    def later_step_starts(self, module: torch.nn.Module) -> None:
        """A training forward of the step's model after the step: the next step to time."""
        if self.later_clock is None and module in (self.model, self.wrapper) and module.training and torch.is_grad_enabled():
            self.collector_was_enabled = gc.isenabled()
            gc.disable()  # as timeit does: a collection inside one step is noise
            self.later_clock = StepClock(_device_of(module))
            self.later_clock.start()

    def later_step_ends(self) -> None:
        assert self.later_clock is not None
        self.later.append(self.later_clock.stop())
        self.later_clock = None
        if self.collector_was_enabled:
            gc.enable()
        self.stopping = len(self.later) >= self.watch.later_steps


class ScriptStep(StepDefaults):
    """`ReplayableStep` for a script: each run re-runs it up to its step's backward (and,
    when the watch asks for later steps, on through that many more, each timed)."""

    def __init__(self, path: Path, label: str, args: Sequence[str], timeout: float | None, notes: list[str]) -> None:
        self.path = path
        self.label = label
        self.args = tuple(args)
        self.timeout = timeout
        self.notes = notes
        self.names: dict[int, str] = {}
        self.excluded: set[int] = set()
        self.model: torch.nn.Module | None = None
        self.loss_source = "the loss the script calls backward() on"
        self._fingerprint: tuple[float, ...] | None = None
        self._warned: set[tuple[Any, ...]] = set()
        self._current: _Run | None = None
        self._runs = 0
        self.later_step_seconds: tuple[float, ...] = ()

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        saved_argv, saved_path = list(sys.argv), list(sys.path)
        sys.argv = [str(self.path), *self.args]
        sys.path.insert(0, str(self.path.resolve().parent))
        try:
            with torch.compiler.set_stance("force_eager"):
                yield
        finally:
            sys.argv = saved_argv
            sys.path[:] = saved_path

    @property
    def first_run(self) -> bool:
        return self._fingerprint is None

    def started(self, model: torch.nn.Module) -> None:
        """The step begins: name the model's modules and parameters for this run."""
        self.model = model
        self.names.clear()
        self.names.update({id(module): name for name, module in model.named_modules()})
        self.excluded.clear()
        for tensor in [*model.parameters(), *model.buffers()]:
            try:
                self.excluded.add(tensor.untyped_storage().data_ptr())
            except (RuntimeError, NotImplementedError):
                continue

    def step_modules(self, model: torch.nn.Module, others: list[torch.nn.Module]) -> list[tuple[str, torch.nn.Module]]:
        modules = list(model.named_modules())
        seen = {id(m) for _, m in modules}
        for index, other in enumerate(others):
            for name, module in other.named_modules():
                if id(module) not in seen:
                    seen.add(id(module))
                    qualified = ".".join(p for p in (f"{type(other).__name__}[{index}]", name) if p)
                    modules.append((qualified, module))
                    self.names.setdefault(id(module), qualified)
        return modules

    def run(self, switch: contextlib.AbstractContextManager[Any], watch: StepWatch = NOT_WATCHED) -> RunOutcome:
        state = self._run_script(_Run(self, watch), switch)
        assert state.outcome is not None
        return state.outcome

    def timed(self, switch: contextlib.AbstractContextManager[Any]) -> float:
        state = self._run_script(_Run(self, NOT_WATCHED), switch)
        assert state.clock is not None
        return state.clock.seconds

    def checkpoint_gate(self, function: Callable[..., Any], args: tuple[Any, ...]) -> bool:
        return self._current is not None and self._current.admits(function, args)

    def _run_script(self, state: _Run, switch: contextlib.AbstractContextManager[Any]) -> _Run:
        """Run the script with `switch` in force throughout (a checkpoint call may open the
        step) and the step's meters from its opening to its backward."""
        _seed_everything()
        failure: str | None = None
        self._current = state
        try:
            with self._warnings_once(), self._quiet_after_first_run(), _step_hooks(state), switch, _deadline(self.timeout):
                runpy.run_path(str(self.path), run_name="__main__")
        except _StepDone:
            pass
        except (ScriptTimedOut, SystemExit) as stopped:
            if not state.done:  # after the step, the end of the script only ends the later steps' timing
                failure = early_end(self.label, self.timeout, stopped, f"{TRAINING_FORWARD} and a backward after it")
        except Exception as error:
            # After the step, a failure of the script only ends the later steps' timing.
            if state.opened and not state.done:  # the step itself raised: the caller reports it
                state.close(error)
                error.__traceback__ = None
                raise
            if not state.done:
                failure = early_end(self.label, self.timeout, error, TRAINING_FORWARD)
        finally:
            state.close()
            if state.later_clock is not None and state.collector_was_enabled:
                gc.enable()  # the script ended inside a later step
            self._current = None
        if state.failure is not None:
            raise state.failure
        if not state.done:
            if state.opened:
                began = f"a training forward of {type(state.model).__name__}" if state.model is not None else "a checkpoint call"
                raise NoTrainingStep(
                    failure or f"{self.label} ran {began} but never called backward() after it, so there is no step to verify"
                )
            raise NoTrainingStep(
                (failure + "; nothing to verify")
                if failure
                else f"{self.label} finished without training: it never ran {TRAINING_FORWARD}, so there is no step to verify"
            )
        self._check_same_start(state)
        self._runs += 1
        self.later_step_seconds = tuple(state.later)
        return state

    @contextlib.contextmanager
    def _quiet_after_first_run(self) -> Iterator[None]:
        """The script's prints, once: later runs repeat them word for word."""
        if self._runs == 0:
            yield
            return
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            yield

    @contextlib.contextmanager
    def _warnings_once(self) -> Iterator[None]:
        """Each run executes the script afresh, so Python would repeat its warnings once per
        run: show each distinct one once over all runs."""
        fresh: list[warnings.WarningMessage] = []
        try:
            with warnings.catch_warnings(record=True) as caught:  # the filters in force stay
                try:
                    yield
                finally:
                    for warning in caught:
                        key = (str(warning.message), warning.category, warning.filename, warning.lineno)
                        if key not in self._warned:
                            self._warned.add(key)
                            fresh.append(warning)
        finally:  # shown once the recording is over (while it lasts, showing records)
            for warning in fresh:
                warnings.showwarning(warning.message, warning.category, warning.filename, warning.lineno)

    def _check_same_start(self, state: _Run) -> None:
        if self._fingerprint is None:
            self._fingerprint = state.fingerprint
            assert state.model is not None
            self.notes.append(
                f"script mode: the step runs from the first training-mode forward of {type(state.model).__name__} in "
                f"{self.path.name} to the backward() after it; the script ran for a warm-up and for each measured step, "
                "and went on after each measured step to have its next steps timed (a script that trains fewer steps "
                "than --repeat asks is run again for the rest)"
            )
        elif state.fingerprint != self._fingerprint:
            raise VerifyError(
                f"{self.label} does not start its first training step from the same parameters and inputs each time it "
                "runs (ckptlint seeds torch, random and NumPy before each run; the script reads something else that "
                "changes: a clock, a file, an unseeded generator), so the two runs cannot be compared; verify a "
                "make_case() instead"
            )


def early_end(label: str, timeout: float | None, ending: BaseException, what: str) -> str | None:
    """How a script ended before `what`: timed out, exited non-zero, raised (None: exit 0)."""
    if isinstance(ending, ScriptTimedOut):
        return f"{label} ran for {timeout:g} s (--timeout) without {what}"
    if isinstance(ending, SystemExit):
        return f"{label} exited with status {ending.code} before {what}" if ending.code not in (None, 0) else None
    return f"{label} raised {type(ending).__name__}: {ending}{_where(ending)} before {what}"


def _seed_everything() -> None:
    torch.manual_seed(SEED)
    random.seed(SEED)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(SEED)


def _fingerprint(model: torch.nn.Module, inputs: Any) -> tuple[float, ...]:
    """Cheap sums of the parameters and the input tensors: equal when a run starts its step
    where the first run did."""
    tensors = [p for p in model.parameters()] + _tensors(inputs)
    with torch.no_grad():
        return tuple(float(t.detach().double().sum()) if t.is_floating_point() or not t.is_complex() else 0.0 for t in tensors)


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _unique_parameters(modules: list[tuple[str, torch.nn.Module]]) -> list[tuple[str, torch.nn.Parameter]]:
    seen: set[int] = set()
    parameters = []
    for prefix, module in modules:
        for name, parameter in module.named_parameters(recurse=False):
            if id(parameter) not in seen:
                seen.add(id(parameter))
                parameters.append((f"{prefix}.{name}" if prefix else name, parameter))
    return parameters


def _loss_source(loss: Any) -> str:
    """Where the script calls backward(): `the tensor train.py:42 calls backward() on (loss.backward())`."""
    for frame in reversed(traceback.extract_stack()[:-3]):
        if not is_library_file(frame.filename):
            line = linecache.getline(frame.filename, frame.lineno or 0).strip()
            shape = f"a tensor of shape {list(loss.shape)}" if isinstance(loss, torch.Tensor) and loss.dim() else "the scalar"
            return f"{shape} that {os.path.basename(frame.filename)}:{frame.lineno} calls backward() on: `{line}`"
    return "the tensor the script calls backward() on"


def _where(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return ""
    last = frames[-1]
    return f" (at {os.path.relpath(last.filename) if os.path.isabs(last.filename) else last.filename}:{last.lineno})"


def _device_of(module: torch.nn.Module | None) -> torch.device:
    for parameter in module.parameters() if module is not None else ():
        return parameter.device
    return torch.device("cpu")


def _trainable(module: torch.nn.Module) -> bool:
    return any(p.requires_grad for p in module.parameters())


@contextlib.contextmanager
def _step_hooks(state: _Run) -> Iterator[None]:
    """`Module.__call__` starts the step; `torch.autograd.backward` ends it."""
    original_call = torch.nn.Module.__call__
    original_backward = torch.autograd.backward
    owner = os.getpid()  # forked DataLoader workers inherit the wrappers; only this process takes part
    local = state.local

    def call(self: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        # A forward inside backward is a recomputation (reentrant checkpoint recomputes in
        # the engine's thread, where this thread's depth is not seen): it neither starts the
        # step nor joins it, and nothing may be raised through autograd there.
        if os.getpid() != owner or in_backward():
            return original_call(self, *args, **kwargs)
        if state.stopping:
            raise _StepDone()  # the script caught the stop and went on: stop it again
        depth = getattr(local, "depth", 0)
        if state.done:
            if depth == 0:
                state.later_step_starts(self)
        elif depth == 0 and _trainable(self):
            if state.model is None and self.training and torch.is_grad_enabled():
                state.identify(self, args, kwargs)
                state.open(_device_of(self))
            elif state.model is not None and self is not state.model and self is not state.wrapper:
                state.others.append(self)
        local.depth = depth + 1
        try:
            return original_call(self, *args, **kwargs)
        finally:
            local.depth = depth

    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        # Only the outermost backward is the step's: reentrant checkpoint's own
        # `torch.autograd.backward`, run by the engine inside the step's backward, is not.
        if os.getpid() != owner or not state.opened or in_backward():
            return original_backward(tensors, *args, **kwargs)
        if state.stopping:
            raise _StepDone()
        if state.done:  # a later step, timed
            if state.later_clock is None:
                return original_backward(tensors, *args, **kwargs)
            original_backward(tensors, *args, **kwargs)
            state.later_step_ends()
            if state.stopping:
                raise _StepDone()
            return None
        try:
            state.backward(original_backward, tensors, args, kwargs)
        except Exception as error:
            state.close(error)
            state.failure = error
            raise _StepDone() from None
        if state.stopping:
            raise _StepDone()
        return None

    torch.nn.Module.__call__ = call  # type: ignore[method-assign]
    torch.autograd.backward = backward
    try:
        yield
    finally:
        torch.nn.Module.__call__ = original_call  # type: ignore[method-assign]
        torch.autograd.backward = original_backward


@contextlib.contextmanager
def _deadline(timeout: float | None) -> Iterator[None]:
    """Raise ScriptTimedOut in this thread after `timeout` seconds."""
    import ctypes
    import signal

    if not timeout or timeout <= 0:
        yield
        return
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):

        def on_alarm(signum: int, frame: Any) -> None:
            raise ScriptTimedOut()

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        return
    # Elsewhere (a worker thread): an asynchronous exception, checked between bytecodes.
    thread_id = threading.get_ident()
    done = threading.Event()

    def interrupt() -> None:
        if not done.is_set():
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(ScriptTimedOut))

    timer = threading.Timer(timeout, interrupt)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        done.set()
        timer.cancel()
