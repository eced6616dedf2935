"""One rank's replay of the training step under FSDP, as the single-process verifier replays
it: a warm-up step, the step with checkpointing switched off, the step as configured, then
timed steps of each; all ranks in lockstep, since every step issues collectives.

Differences from the single-process replay (`_verify`):
- the snapshot is taken after the warm-up, once FSDP has initialised itself lazily (its
  first forward sets up state that restoring an earlier snapshot would remove); the model
  is not handed back, the rank's process ends with the run;
- collectives are counted per phase of each step (`_collectives`);
- gradients are compared in full: gathered from the shards after each step on every rank
  (a collective) and compared on rank 0; rank 0 keeps them to compare, once the others are
  done, with a single process running the same model on the global batch (`reference_step`,
  `with_reference`);
- buffers, plain attributes, the RNG state and the loss are compared on each rank, where
  they live;
- a checkpointed step that raises ends the rank (the other ranks are stuck in a collective
  or crash the same way; torchrun tears them down), and the parent reports it.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ckptlint.runtime_check._collectives import BACKWARD, FORWARD, CollectiveCounter, CollectiveTally
from ckptlint.runtime_check._eager import eager_module, eager_stance
from ckptlint.runtime_check._fsdp_structure import (
    clean_name,
    compute_dtypes,
    enclosing_units,
    gather_full_gradients,
    is_fsdp1_unit,
    is_unit,
    model_class_name,
)
from ckptlint.runtime_check._journal import RankJournal
from ckptlint.runtime_check._memory import SavedTensorMeter
from ckptlint.runtime_check._rank_records import BaselineRecord, RankOutcome, RegionSites
from ckptlint.runtime_check._regions import RegionCall, RegionRecorder, _owning_module
from ckptlint.runtime_check._state import ModelSnapshot, RngState, attribute_fingerprints
from ckptlint.runtime_check._step import StepInputs, StepLoss, run_step
from ckptlint.runtime_check._replay import NOT_WATCHED, RegionOf, StepDefaults, StepWatch, run_watched
from ckptlint.runtime_check._switch import Gate, checkpointing_disabled
from ckptlint.runtime_check._types import (
    ERROR,
    Finding,
    MemoryFigure,
    MemoryReport,
    NoCheckpointingFound,
    Tolerance,
    VerifyError,
)
from ckptlint.runtime_check._compare import (
    RunOutcome,
    compare_attributes,
    compare_buffers,
    compare_gradients,
    compare_loss,
    compare_rng,
)
from ckptlint.runtime_check._measure import BASELINE, CHECKPOINTED, DTYPE_TOLERANCES, first_device, measure
from ckptlint.runtime_check._verify import _memory_warnings, _recomputation, _timed
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import ActivationWrapper


def region_sites(calls: list[RegionCall], holders: dict[int, tuple[str, bool]]) -> RegionSites:
    around: list[str] = []
    inside: Counter[str] = Counter()
    for call in calls:
        if call.implementation != "reentrant":
            continue
        # The module the function is (or is bound to), else the first it ran: a closure
        # (torch's reentrant CheckpointWrapper called with keywords) is judged by what it ran.
        owner = _owning_module(call.function) or next(iter(call.ran_modules), None)
        holder = holders.get(id(owner)) if owner is not None else None
        if holder is None or not holder[1]:
            continue
        if is_fsdp1_unit(owner):
            around.append(holder[0])
        else:
            inside[holder[0]] += 1
    return RegionSites(
        calls=len(calls),
        reentrant=sum(c.implementation == "reentrant" for c in calls),
        reentrant_around_fsdp1_units=tuple(around),
        reentrant_inside_fsdp1_units=tuple(sorted(inside.items())),
    )


class ReferenceUnfit(Exception):
    """The model cannot match one process on the global batch, by design: no reference."""


@dataclass(frozen=True)
class ReferenceStep:
    """One process, the same model, the global batch, checkpointing off."""

    loss: float
    grads: dict[str, torch.Tensor | None]
    draws_random_numbers: bool


class ShardedSavedTensorMeter(SavedTensorMeter):
    """The saved-tensor meter, leaving out the unsharded parameters forward saves: FSDP frees
    them after forward and gathers them again for backward, so they are not activations."""

    def __init__(self, excluded_storages: set[int], model: torch.nn.Module, region_of: RegionOf | None = None) -> None:
        super().__init__(excluded_storages, region_of)
        self._flat_parameters = [
            m._handle.flat_param for m in model.modules() if is_fsdp1_unit(m) and getattr(m, "_handle", None) is not None
        ]

    def _pack(self, tensor: torch.Tensor) -> Any:
        # F.linear saves `weight.t()`, a view: its base is the (unsharded) parameter.
        if isinstance(tensor, torch.nn.Parameter) or isinstance(tensor._base, torch.nn.Parameter):
            return tensor
        if self._in_flat_parameter(tensor):
            return tensor
        return super()._pack(tensor)

    def _in_flat_parameter(self, tensor: torch.Tensor) -> bool:
        if not self._flat_parameters:
            return False
        try:
            pointer = tensor.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError, TypeError):
            return False
        return any(flat.untyped_storage().data_ptr() == pointer for flat in self._flat_parameters)


def user_modules(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The model's modules by clean name, without the wrappers (whose plain attributes are
    FSDP's and checkpoint_wrapper's bookkeeping, not the model's state)."""
    return [
        (clean_name(name), module)
        for name, module in model.named_modules()
        if not is_fsdp1_unit(module) and not isinstance(module, ActivationWrapper)
    ]


def reference_tolerance(dtypes: set[torch.dtype], rtol: float | None, atol: float | None) -> Tolerance:
    """Sharding changes the order of the additions (the reduce-scatter averages per-rank
    gradients), so even float32 on CPU is compared within torch.testing's tolerance, that of
    the least precise dtype the step computes in."""
    if rtol is not None or atol is not None:
        return Tolerance(float(rtol or 0.0), float(atol or 0.0), "rtol/atol given")
    dtype = max(dtypes, key=lambda d: DTYPE_TOLERANCES.get(d, (1.3e-6, 1e-5))[0])
    rtol_default, atol_default = DTYPE_TOLERANCES.get(dtype, (1.3e-6, 1e-5))
    return Tolerance(rtol_default, atol_default, f"{str(dtype).replace('torch.', '')} defaults (sharded vs one process)")


def batch_coupled_modules(model: torch.nn.Module) -> list[str]:
    """Modules whose training-mode output depends on the whole (local) batch: each rank
    normalises its slice with the slice's statistics, one process the whole batch's."""
    return [
        clean_name(name) or "(model)"
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.modules.batchnorm._BatchNorm)
        and not isinstance(module, torch.nn.SyncBatchNorm)
        and module.training
    ]


def reference_step(model: torch.nn.Module, inputs: Any, loss_fn: Callable[[Any], torch.Tensor] | None) -> ReferenceStep:
    """A warm-up and one measured step with checkpointing off, in a process group of one."""
    model = eager_module(model, [])
    coupled = batch_coupled_modules(model)
    if coupled:
        raise ReferenceUnfit(
            f"{len(coupled)} BatchNorm layer(s) in training mode (first: '{coupled[0]}') normalise each rank's slice "
            "of the batch with its own statistics, so one process on the whole batch computes other gradients"
        )
    step_inputs = StepInputs.from_inputs(inputs).detached()
    names = {id(m): clean_name(n) for n, m in model.named_modules()}
    loss = StepLoss(loss_fn)
    with checkpointing_disabled(RegionRecorder(names, watch=False)):
        run_step(model, step_inputs, loss)
        if loss.source.startswith("fixed random projection"):
            raise ReferenceUnfit(
                "the loss is a random projection of the output, which is drawn for the output's shape: one rank's "
                "slice and the whole batch get different projections (give make_case a loss_fn)"
            )
        for tensor in [*model.parameters(), *step_inputs.tensors()]:
            tensor.grad = None
        before = RngState.torch_states()
        value = run_step(model, step_inputs, loss)
        after = RngState.torch_states()
    grads = {name: (g.cpu() if g is not None else None) for name, g in gather_full_gradients(model).items()}
    draws = any(name not in after or not torch.equal(state, after[name]) for name, state in before.items())
    return ReferenceStep(float(value), grads, draws)


class RankStep(StepDefaults):
    """`ReplayableStep` for one rank of a sharded step. Every run issues collectives, so
    every rank runs the same sequence in lockstep: the configured step's exception ends the
    rank (the others are stuck in a collective, or crash the same way), and "nothing was
    checkpointed" is decided on rank 0 once all steps have run. The snapshot is taken after
    the warm-up (FSDP initialises itself on its first forward) with the buffers as make_case
    left them; each measured run counts its collectives per phase, follows the journal
    (`<label> forward`, `<label> backward`, `<label> gather`) and gathers the full gradients
    (a collective; rank 0 keeps them)."""

    stops_without_checkpointing = False
    raises_checkpointed_failure = True

    def __init__(
        self,
        model: torch.nn.Module,
        inputs: StepInputs,
        loss: StepLoss,
        *,
        journal: RankJournal,
        counter: CollectiveCounter,
        rank: int,
        notes: list[str],
    ) -> None:
        self.model = model
        self.inputs = inputs
        self.loss = loss
        self.journal = journal
        self.counter = counter
        self.rank = rank
        self.notes = notes
        self.names = {id(module): clean_name(name) or "(model)" for name, module in model.named_modules()}
        self.modules = user_modules(model)
        self.holders = enclosing_units(model)
        self.device = first_device(list(model.named_parameters()))
        self.checkpoint_gate: Gate | None = None
        self.excluded: set[int] = set()
        self.snapshot: ModelSnapshot | None = None
        self.sites = region_sites([], self.holders)
        self.collectives: dict[str, CollectiveTally] = {}
        self.baseline_record: BaselineRecord | None = None
        with torch.no_grad():
            self._initial_buffers = {id(b): b.detach().clone() for b in model.buffers()}
        self._timing = False

    @property
    def loss_source(self) -> str:
        return self.loss.source

    @property
    def model_name(self) -> str:
        return model_class_name(self.model)

    def session(self) -> contextlib.AbstractContextManager[None]:
        return eager_stance(self.model, self.notes)

    def saved_tensor_meter(self, region_of: RegionOf | None) -> SavedTensorMeter:
        return ShardedSavedTensorMeter(self.excluded, self.model, region_of)

    def regions_ran(self, recorder: RegionRecorder) -> None:
        self.sites = region_sites(recorder.calls, self.holders)

    def modules_by_name(self) -> dict[str, torch.nn.Module]:
        return dict(self.modules)

    def run(self, switch: contextlib.AbstractContextManager[Any], watch: StepWatch = NOT_WATCHED) -> RunOutcome:
        if self.snapshot is None:  # the warm-up
            self.journal.enter("warm-up")
            with switch:
                value = run_step(self.model, self.inputs, self.loss)
            self.snapshot = ModelSnapshot(self.model, self.inputs.tensors())
            # Both runs start from the buffers as make_case left them (running statistics then
            # read as without --nproc), not as the warm-up left them.
            self.snapshot.values.update((key, v) for key, v in self._initial_buffers.items() if key in self.snapshot.values)
            self.excluded.update(self.snapshot.storage_pointers())
            return self._outcome(value, {})
        self.snapshot.prepare_run()
        label = watch.label

        def on_backward() -> None:
            if watch.on_backward is not None:
                watch.on_backward()
            self.counter.phase = BACKWARD
            self.journal.enter(f"{label} backward")

        self.counter.reset()
        self.counter.phase = FORWARD
        self.journal.enter(f"{label} forward")
        try:
            value = run_watched(self.model, self.inputs, self.loss, switch, watch, on_backward=on_backward)
        finally:
            self.counter.phase = None
        self.collectives[label] = self.counter.tally()
        outcome = self._outcome(value, {})
        self.journal.enter(f"{label} gather")
        outcome.grads = self._gathered()
        if label == BASELINE:
            self.baseline_record = BaselineRecord(float(value), self.loss.source, self.collectives[label], self.sites)
            self.journal.record("baseline", self.baseline_record)
        return outcome

    def timed(self, switch: contextlib.AbstractContextManager[Any]) -> float:
        if not self._timing:
            self._timing = True
            self.journal.enter("timing")
        assert self.snapshot is not None
        self.snapshot.prepare_run()
        with switch:
            return _timed(lambda: run_step(self.model, self.inputs, self.loss), self.device)

    def _outcome(self, value: torch.Tensor, grads: dict[str, torch.Tensor | None]) -> RunOutcome:
        with torch.no_grad():
            buffers = {clean_name(name): b.detach().clone() for name, b in self.model.named_buffers()}
        return RunOutcome(float(value), grads, buffers, attribute_fingerprints(self.modules), RngState.torch_states())

    def _gathered(self) -> dict[str, torch.Tensor | None]:
        grads = gather_full_gradients(self.model)
        if self.rank != 0:
            return {}
        return {name: (g.cpu() if g is not None else None) for name, g in grads.items()}


def replay(
    model: torch.nn.Module,
    inputs: StepInputs,
    loss_fn: Callable[[Any], torch.Tensor] | None,
    *,
    journal: RankJournal,
    counter: CollectiveCounter,
    rank: int,
    rtol: float | None,
    atol: float | None,
    repeat: int,
    measure_peak: bool,
    notes: tuple[str, ...] = (),
) -> tuple[RankOutcome, GatheredGradients | None]:
    """Run the protocol's steps on this rank (a collective affair: every rank calls it
    together). Rank 0 also returns the gathered gradients, for `with_reference`."""
    notes_list = list(notes)
    model = eager_module(model, notes_list)
    if not any(is_unit(m) for m in model.modules()):
        raise VerifyError(
            "the model has no FSDP unit (FullyShardedDataParallel or fully_shard): --nproc verifies sharded "
            "training steps; verify this model without --nproc"
        )
    if not any(p.requires_grad for p in model.parameters()):
        raise VerifyError("the model has no parameter that requires grad: there is no training step to verify")
    loss = StepLoss(loss_fn)
    journal.counter = counter
    step = RankStep(model, inputs.detached(), loss, journal=journal, counter=counter, rank=rank, notes=notes_list)
    runs = measure(step, rtol=rtol, atol=atol, repeat=repeat, measure_peak=measure_peak)
    assert runs.checkpointed is not None and step.baseline_record is not None  # a failure ended the rank
    device, dtype, tolerance, calls, causes = runs.device, runs.dtype, runs.tolerance, runs.calls, runs.causes
    baseline, checkpointed = runs.baseline, runs.checkpointed
    baseline_recomputes, checkpointed_recomputes = runs.baseline_recomputes, runs.checkpointed_recomputes
    region_recomputes = runs.region_recomputes
    baseline_meter, checkpointed_meter = runs.baseline_meter, runs.checkpointed_meter
    baseline_peak, checkpointed_peak = runs.baseline_peak, runs.checkpointed_peak
    baseline_record, checkpointed_collectives = step.baseline_record, step.collectives[CHECKPOINTED]
    baseline_grads, checkpointed_grads = baseline.grads, checkpointed.grads
    modules = step.modules
    baseline_times, checkpointed_times = runs.baseline_times, runs.checkpointed_times
    journal.counter = None
    journal.enter("report")
    if not loss.source.startswith("loss_fn"):
        notes_list.append(f"loss: {loss.source}")

    recomputation = _recomputation(
        calls, baseline_recomputes.count, checkpointed_recomputes.count, region_recomputes.count, baseline_recomputes.origin
    )

    local_findings: list[Finding] = []
    frozen = [c for c in calls if c.implementation == "reentrant" and not c.inputs_require_grad]
    no_rng = [c for c in calls if not c.preserve_rng_state]
    loss_comparison = compare_loss(loss.source, baseline, checkpointed, tolerance, local_findings)
    rng = compare_rng(baseline, checkpointed, no_rng, local_findings)
    modules_by_name = dict(modules)
    buffers = compare_buffers(baseline, checkpointed, tolerance, modules_by_name, local_findings)
    attributes = compare_attributes(baseline, checkpointed, modules_by_name, local_findings)
    activations = MemoryFigure("saved_tensor_bytes", baseline_meter.held_at_backward, checkpointed_meter.held_at_backward)
    peak = None
    if baseline_peak.peak is not None and checkpointed_peak.peak is not None:
        peak = MemoryFigure(baseline_peak.metric, baseline_peak.peak, checkpointed_peak.peak)
    _memory_warnings(activations, peak, local_findings)

    result = RankOutcome(
        rank=rank,
        model=model_class_name(model),
        device=str(device),
        dtype=str(dtype).replace("torch.", ""),
        loss=loss_comparison,
        baseline=baseline_record,
        checkpointed_collectives=checkpointed_collectives,
        recomputation=recomputation,
        buffers=buffers,
        attributes=attributes,
        rng=rng,
        memory=MemoryReport(activations, peak),
        baseline_samples=tuple(baseline_times),
        checkpointed_samples=tuple(checkpointed_times),
        findings=tuple(dataclasses.replace(f, rank=rank) for f in local_findings),
        notes=tuple(notes_list),
    )
    if rank != 0:
        return result, None

    gradient_findings: list[Finding] = []
    gradients = compare_gradients(
        RunOutcome(baseline.loss, baseline_grads, {}, {}, {}),
        RunOutcome(checkpointed.loss, checkpointed_grads, {}, {}, {}),
        tolerance,
        causes,
        frozen,
        max(len(frozen), region_recomputes.reentrant_without_grad_inputs),
        bool(rng.mismatched),
        gradient_findings,
    )
    recomputed = recomputation.checkpointed_module_forwards + recomputation.checkpointed_region_recomputes
    if recomputed == 0:
        if not calls:
            raise NoCheckpointingFound(
                "no checkpointing found: the step made no torch.utils.checkpoint call and backward recomputed "
                "nothing, so there is nothing to verify"
            )
        if not any(f.severity == ERROR for f in gradient_findings + local_findings):
            raise NoCheckpointingFound(
                f"no checkpointing found: the step called checkpoint {len(calls)} time(s) but backward recomputed nothing"
            )
    result = dataclasses.replace(result, tolerance=tolerance, gradients=gradients, gradient_findings=tuple(gradient_findings))
    return result, GatheredGradients(baseline_grads, checkpointed_grads, frozenset({dtype} | compute_dtypes(model)))


@dataclass(frozen=True)
class GatheredGradients:
    """Rank 0's full gradients of both steps, kept for the single-process reference."""

    baseline: dict[str, torch.Tensor | None]
    checkpointed: dict[str, torch.Tensor | None]
    dtypes: frozenset[torch.dtype]  # the parameters' and the mixed-precision compute dtypes


def with_reference(
    outcome: RankOutcome, gathered: GatheredGradients, reference: ReferenceStep, rtol: float | None, atol: float | None
) -> RankOutcome:
    """Rank 0's outcome, with both steps' gradients compared against the reference."""
    tolerance = reference_tolerance(set(gathered.dtypes), rtol, atol)
    compared = [
        compare_gradients(
            RunOutcome(reference.loss, reference.grads, {}, {}, {}), RunOutcome(0.0, grads, {}, {}, {}), tolerance, [], [], 0, False, []
        )
        for grads in (gathered.baseline, gathered.checkpointed)
    ]
    return dataclasses.replace(
        outcome,
        reference_baseline=compared[0],
        reference_checkpointed=compared[1],
        reference_loss=reference.loss,
        reference_tolerance=tolerance,
    )
