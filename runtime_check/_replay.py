"""A step the verifier can run again and again: `ModelStep` for a model and its inputs
(restored from a snapshot before each run), `ScriptStep` (in `_script`) for a training
script (re-run from its start up to its first backward).

The verifier only asks a step to run inside some context managers (checkpointing switched
off or counted, the memory meters), to call `on_backward` between the loss and backward,
and to hand back what the run left (`RunOutcome`) or how long it took.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol, Sequence

import torch

from ckptlint.runtime_check._compare import RunOutcome
from ckptlint.runtime_check._memory import SavedTensorMeter
from ckptlint.runtime_check._regions import RegionRecorder
from ckptlint.runtime_check._state import ModelSnapshot, RngState, attribute_fingerprints
from ckptlint.runtime_check._step import StepInputs, StepLoss, run_step
from ckptlint.runtime_check._switch import Gate

BackwardContext = Callable[[], contextlib.AbstractContextManager[Any]]
RegionOf = Callable[[], "tuple[int, frozenset[int]] | None"]


@dataclass(frozen=True)
class StepWatch:
    """What watches the step itself: `meters` entered for the step only, `on_backward`
    called between the loss and backward, `backward_context()` entered around backward;
    `later_steps`: a script goes on past the measured step and times up to that many of its
    next steps (unwatched), so that timing needs no run of its own (`later_step_seconds`)."""

    meters: Sequence[contextlib.AbstractContextManager[Any]] = ()
    on_backward: Callable[[], None] | None = None
    backward_context: BackwardContext | None = None
    later_steps: int = 0
    label: str = ""  # which run of the protocol this is: "warm-up", "baseline", "checkpointed"


NOT_WATCHED = StepWatch()


class ReplayableStep(Protocol):
    names: dict[int, str]  # id(module) -> qualified name, for the model of the latest run
    excluded: set[int]  # storages of parameters and buffers: not activations
    model: torch.nn.Module | None  # the latest run's model (None before the first run)
    loss_source: str  # which loss is verified, in words
    checkpoint_gate: Gate | None  # which checkpoint calls belong to the step (None: all)
    later_step_seconds: tuple[float, ...]  # the latest run's later steps, timed (`StepWatch.later_steps`)

    def session(self) -> contextlib.AbstractContextManager[None]: ...

    def run(self, switch: contextlib.AbstractContextManager[Any], watch: StepWatch = NOT_WATCHED) -> RunOutcome:
        """One step with `switch` (checkpointing off or counted) in force, `watch` on the step."""

    def timed(self, switch: contextlib.AbstractContextManager[Any]) -> float: ...

    # What differs between the steps, with `StepDefaults` giving the common answers.
    stops_without_checkpointing: bool  # no checkpoint call in the baseline: stop before the rest
    raises_checkpointed_failure: bool  # the configured step's exception ends the replay (ranks in lockstep)

    @property
    def model_name(self) -> str: ...

    def saved_tensor_meter(self, region_of: RegionOf | None) -> SavedTensorMeter:
        """The meter of what the step saves for backward (`region_of`: the running region)."""

    def regions_ran(self, recorder: RegionRecorder) -> None:
        """The baseline's regions, before the recorder lets go of them (just before backward)."""

    def modules_by_name(self) -> dict[str, torch.nn.Module]: ...


class StepDefaults:
    """The common answers of `ReplayableStep` (a rank of a sharded step gives its own)."""

    model: torch.nn.Module | None
    excluded: set[int]
    stops_without_checkpointing = True
    raises_checkpointed_failure = False
    later_step_seconds: tuple[float, ...] = ()

    @property
    def model_name(self) -> str:
        return type(self.model).__name__

    def saved_tensor_meter(self, region_of: RegionOf | None) -> SavedTensorMeter:
        return SavedTensorMeter(self.excluded, region_of)

    def regions_ran(self, recorder: RegionRecorder) -> None:
        return None

    def modules_by_name(self) -> dict[str, torch.nn.Module]:
        assert self.model is not None
        return dict(self.model.named_modules())


class StepClock:
    """Seconds between `start` and `stop`; on CUDA measured by CUDA events, so the figure is
    the device's time for the step, not the host's time to queue it."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self._events: tuple[Any, Any] | None = None
        self._started = 0.0
        self.seconds = 0.0

    def start(self) -> None:
        if self.device.type == "cuda":
            self._events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            torch.cuda.synchronize(self.device)
            self._events[0].record()
        else:
            self._started = time.perf_counter()

    def stop(self) -> float:
        if self._events is not None:
            self._events[1].record()
            torch.cuda.synchronize(self.device)
            self.seconds = self._events[0].elapsed_time(self._events[1]) / 1000.0
        else:
            self.seconds = time.perf_counter() - self._started
        return self.seconds


def run_watched(
    model: torch.nn.Module,
    inputs: StepInputs,
    loss: StepLoss,
    switch: contextlib.AbstractContextManager[Any],
    watch: StepWatch,
    *,
    on_backward: Callable[[], None] | None = None,
    autocast: tuple[tuple[str, torch.dtype], ...] = (),
) -> torch.Tensor:
    """One step of `model` with `switch` and the watch's meters in force; `on_backward`
    (default: the watch's) runs between the loss and backward. Returns the loss."""
    with contextlib.ExitStack() as stack:
        for context in (switch, *watch.meters):
            stack.enter_context(context)
        return run_step(
            model,
            inputs,
            loss,
            on_backward=on_backward or watch.on_backward,
            backward_context=watch.backward_context() if watch.backward_context is not None else None,
            autocast=autocast,
        )


def outcome_of(
    loss: float,
    parameters: list[tuple[str, torch.nn.Parameter]],
    leaves: list[tuple[str, torch.Tensor]],
    modules: list[tuple[str, torch.nn.Module]],
) -> RunOutcome:
    grads: dict[str, torch.Tensor | None] = {name: p.grad for name, p in parameters if p.requires_grad}
    grads.update({name: t.grad for name, t in leaves})
    with torch.no_grad():
        buffers = {f"{prefix}.{name}" if prefix else name: b.detach().clone() for prefix, module in modules for name, b in module.named_buffers(recurse=False)}
    return RunOutcome(loss, grads, buffers, attribute_fingerprints(modules), RngState.torch_states())


class ModelStep(StepDefaults):
    """One step of `model` on `inputs`, forward, loss, backward; each run from the snapshot."""

    def __init__(
        self,
        model: torch.nn.Module,
        inputs: StepInputs,
        loss: StepLoss,
        autocast: tuple[tuple[str, torch.dtype], ...],
        session: Callable[[], contextlib.AbstractContextManager[None]],
    ) -> None:
        self.model = model
        self.inputs = inputs
        self.loss = loss
        self.autocast = autocast
        self.names = {id(module): name for name, module in model.named_modules()}
        self.modules = list(model.named_modules())
        self.parameters = list(model.named_parameters())
        self.leaves = inputs.named_leaves()
        self.snapshot = ModelSnapshot(model, inputs.tensors())
        self.excluded: set[int] = set()
        self.checkpoint_gate: Gate | None = None
        self._session = session

    @property
    def loss_source(self) -> str:
        return self.loss.source

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        try:
            with self._session():
                yield
        finally:
            self.snapshot.restore()

    def _prepare(self) -> None:
        self.snapshot.prepare_run()
        self.excluded.clear()
        self.excluded.update(self.snapshot.storage_pointers())

    def run(self, switch: contextlib.AbstractContextManager[Any], watch: StepWatch = NOT_WATCHED) -> RunOutcome:
        self._prepare()
        value = run_watched(self.model, self.inputs, self.loss, switch, watch, autocast=self.autocast)
        return outcome_of(float(value), self.parameters, self.leaves, self.modules)

    def timed(self, switch: contextlib.AbstractContextManager[Any]) -> float:
        self._prepare()
        clock = StepClock(next((p.device for _, p in self.parameters), torch.device("cpu")))
        with switch:
            clock.start()
            run_step(self.model, self.inputs, self.loss, autocast=self.autocast)
            return clock.stop()
