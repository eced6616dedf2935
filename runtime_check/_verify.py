"""One process's verdict: the replay protocol's runs (`_measure`) compared and reported.

Both runs start from the same snapshot (parameters, buffers, plain attributes, RNG) in the
same train/eval mode. Sequence: a warm-up step, the two measured runs (saved-tensor meter,
peak meter, recompute counters), then `repeat` timed steps of each; the snapshot is restored
before every run and, with the user's own gradients, at the end.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any, Callable

import torch

from ckptlint.runtime_check._compare import (
    STATE_CODES,
    compare_attributes,
    compare_buffers,
    compare_gradients,
    compare_loss,
    compare_rng,
)
from ckptlint.runtime_check._eager import eager_module, eager_stance
from ckptlint.runtime_check._journal import first_paragraph
from ckptlint.runtime_check._measure import NO_CHECKPOINT_CALL, measure
from ckptlint.runtime_check._profile import budget_plan, region_costs
from ckptlint.runtime_check._ranking import rank_findings
from ckptlint.runtime_check._render import format_bytes
from ckptlint.runtime_check._regions import RegionCall
from ckptlint.runtime_check._replay import ModelStep, ReplayableStep
from ckptlint.runtime_check._step import StepInputs, StepLoss
from ckptlint.runtime_check._switch import TESTED_TORCH_RELEASES, untested_torch_warning
from ckptlint.runtime_check._types import (
    CAUSE,
    ERROR,
    FAIL,
    PASS,
    WARNING,
    AttributeChange,
    BufferComparison,
    Finding,
    GradientComparison,
    LossComparison,
    MemoryFigure,
    MemoryReport,
    NoCheckpointingFound,
    Recomputation,
    RngComparison,
    SYMPTOM,
    Series,
    Timelines,
    Timing,
    VerifyError,
)
from ckptlint.runtime_check._report import Report

LOW_SAVING = 0.10
PEAK_RISE = 0.05
DEFAULT_REPEAT = 5

def verify(
    model: torch.nn.Module,
    inputs: Any,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    repeat: int = DEFAULT_REPEAT,
    measure_peak: bool = True,
    target: str | None = None,
    memory_budget: int | None = None,
) -> Report:
    """Replay one training step of `model` on `inputs` with and without checkpointing.

    `inputs`: a tensor (the one positional argument), a tuple of positional arguments, or a
    dict of keyword arguments. `loss_fn(output) -> scalar`; without it, `output.loss` when
    present, else a fixed random projection of every floating output. `rtol`/`atol` replace
    the dtype-derived tolerance (exact for float32/float64 on CPU). `repeat`: timed steps of
    each kind. `measure_peak`: also measure the peak (CPU: one profiled step of each kind).
    `memory_budget`: bytes of activations the step may hold; the report's `budget` names the
    regions to checkpoint to fit it at the least recompute time.

    Returns a `Report` (verdict "pass" or "fail"); raises `VerifyError` when the step cannot
    be verified, `NoCheckpointingFound` when it recomputes nothing. The model, its gradients
    and the RNG states are as they were when this returns.
    """
    return verify_step(
        model,
        StepInputs.from_inputs(inputs),
        loss_fn,
        rtol=rtol,
        atol=atol,
        repeat=repeat,
        measure_peak=measure_peak,
        target=target,
        memory_budget=memory_budget,
    )


def verify_step(
    model: torch.nn.Module,
    inputs: StepInputs,
    loss_fn: Callable[[Any], torch.Tensor] | None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    repeat: int = DEFAULT_REPEAT,
    measure_peak: bool = True,
    target: str | None = None,
    notes: tuple[str, ...] = (),
    autocast: tuple[tuple[str, torch.dtype], ...] = (),
    memory_budget: int | None = None,
) -> Report:
    """`verify` for inputs already split into positional and keyword arguments; `autocast`
    replays the forward under `torch.autocast`."""
    notes_list = list(notes)
    if not isinstance(model, torch.nn.Module):
        raise VerifyError(f"`model` must be a torch.nn.Module, not {type(model).__name__}")
    model = eager_module(model, notes_list)
    if not any(p.requires_grad for p in model.parameters()):
        raise VerifyError("the model has no parameter that requires grad: there is no training step to verify")
    step = ModelStep(model, inputs.detached(), StepLoss(loss_fn), autocast, lambda: eager_stance(model, notes_list))
    return verify_replay(
        step, rtol=rtol, atol=atol, repeat=repeat, measure_peak=measure_peak, target=target, notes=notes_list, memory_budget=memory_budget
    )


def verify_replay(
    step: ReplayableStep,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    repeat: int = DEFAULT_REPEAT,
    measure_peak: bool = True,
    target: str | None = None,
    notes: list[str] | None = None,
    memory_budget: int | None = None,
) -> Report:
    """Run `step` without checkpointing (a warm-up, then measured), as configured
    (measured), then `repeat` timed runs of each, interleaved; compare. `notes` may grow
    while the step runs (the step's session adds what it learns)."""
    started = time.perf_counter()
    notes_list = notes if notes is not None else []
    runs = measure(step, rtol=rtol, atol=atol, repeat=repeat, measure_peak=measure_peak)
    device, dtype, tolerance, modules, model_name = runs.device, runs.dtype, runs.tolerance, runs.modules, runs.model_name
    baseline, checkpointed, checkpointed_error = runs.baseline, runs.checkpointed, runs.checkpointed_error
    calls, causes = runs.calls, runs.causes
    baseline_meter, checkpointed_meter = runs.baseline_meter, runs.checkpointed_meter
    baseline_peak, checkpointed_peak = runs.baseline_peak, runs.checkpointed_peak
    baseline_recomputes, checkpointed_recomputes, region_recomputes = (
        runs.baseline_recomputes,
        runs.checkpointed_recomputes,
        runs.region_recomputes,
    )
    baseline_times, checkpointed_times, recompute_samples = runs.baseline_times, runs.checkpointed_times, runs.recompute_samples

    recomputation = _recomputation(
        calls, baseline_recomputes.count, checkpointed_recomputes.count, region_recomputes.count, baseline_recomputes.origin
    )

    findings: list[Finding] = []
    frozen = [c for c in calls if c.implementation == "reentrant" and not c.inputs_require_grad]
    no_rng = [c for c in calls if not c.preserve_rng_state]
    if checkpointed is None:
        findings.append(
            Finding(
                ERROR,
                causes[0].code if causes else None,
                "step",
                f"the checkpointed step raises {type(checkpointed_error).__name__} while the same step without "
                f"checkpointing runs: {first_paragraph(checkpointed_error)}",
                role=SYMPTOM if causes else None,
            )
        )
        findings.extend(Finding(ERROR, c.code, c.subject, c.message, role=CAUSE) for c in causes)
        loss_comparison = LossComparison(step.loss_source, baseline.loss, None, None, False)
        gradients = GradientComparison(0, 0.0, 0.0, ())
        buffers = BufferComparison(len(baseline.buffers), ())
        attributes: tuple[AttributeChange, ...] = ()
        rng = RngComparison(tuple(baseline.rng), ())
    else:
        loss_comparison = compare_loss(step.loss_source, baseline, checkpointed, tolerance, findings)
        rng = compare_rng(baseline, checkpointed, no_rng, findings)
        buffers = compare_buffers(baseline, checkpointed, tolerance, modules, findings)
        attributes = compare_attributes(baseline, checkpointed, modules, findings)
        gradients = compare_gradients(
            baseline,
            checkpointed,
            tolerance,
            causes,
            frozen,
            max(len(frozen), region_recomputes.reentrant_without_grad_inputs),
            bool(rng.mismatched),
            findings,
            state_code=next((f.code for f in findings if f.role == CAUSE and f.code in STATE_CODES), None),
        )

    recomputed = recomputation.checkpointed_module_forwards + recomputation.checkpointed_region_recomputes
    has_errors = any(f.severity == ERROR for f in findings)
    if checkpointed is not None and recomputed == 0:
        if not calls:
            raise NoCheckpointingFound(NO_CHECKPOINT_CALL)
        if not has_errors:
            reason = (
                f"; {len(frozen)} of them reentrant with no input that requires grad, so backward never reaches them"
                if frozen
                else ": their outputs need no gradient"
            )
            raise NoCheckpointingFound(
                f"no checkpointing found: the step called checkpoint {len(calls)} time(s) but backward recomputed "
                f"nothing{reason}"
            )
        notes_list.append(f"backward recomputed nothing, although the step called checkpoint {len(calls)} time(s)")

    activations = MemoryFigure("saved_tensor_bytes", baseline_meter.held_at_backward, checkpointed_meter.held_at_backward)
    peak = None
    if baseline_peak.peak is not None and checkpointed_peak.peak is not None:
        peak = MemoryFigure(baseline_peak.metric, baseline_peak.peak, checkpointed_peak.peak)
    if checkpointed is not None:
        _memory_warnings(activations, peak, findings, calls)
    untested = untested_torch_warning()
    if untested is not None:
        findings.append(Finding(WARNING, None, "torch", untested))
    timing = Timing(tuple(baseline_times), tuple(checkpointed_times))
    regions = region_costs(calls, baseline_meter.held_by_region, recompute_samples) if checkpointed is not None else ()
    budget = budget_plan(regions, activations.baseline_bytes, memory_budget) if memory_budget is not None and regions else None
    charged = sum(r.saved_bytes for r in regions)
    measured = activations.baseline_bytes - activations.checkpointed_bytes
    if regions and abs(charged - measured) > 0.1 * max(measured, 1):
        notes_list.append(
            f"the regions' savings add up to {format_bytes(charged)}, the step's measured saving is {format_bytes(measured)}: "
            "a region's output kept by the op after it is charged to the region (see regions in the docs)"
        )

    kinds = Counter(c.implementation for c in calls)
    notes_list.append(
        f"{len(calls)} checkpoint call(s) in the step ("
        + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        + f"); backward re-ran {recomputation.checkpointed_region_recomputes} checkpointed function(s) and "
        f"{recomputation.checkpointed_module_forwards} module forward(s)"
    )
    if not step.loss_source.startswith("loss_fn"):
        notes_list.append(f"loss: {step.loss_source}")

    timelines = Timelines(
        saved_baseline=Series("without checkpointing", tuple(baseline_meter.points), baseline_meter.boundary),
        saved_checkpointed=Series("checkpointed", tuple(checkpointed_meter.points), checkpointed_meter.boundary)
        if checkpointed is not None
        else None,
        live_baseline=Series("without checkpointing", tuple(baseline_peak.points), baseline_peak.boundary)
        if baseline_peak.points
        else None,
        live_checkpointed=Series("checkpointed", tuple(checkpointed_peak.points), checkpointed_peak.boundary)
        if checkpointed_peak.points and checkpointed is not None
        else None,
    )
    ordered = rank_findings(findings)
    return Report(
        verdict=FAIL if any(f.severity == ERROR for f in ordered) else PASS,
        target=target or model_name,
        model=model_name,
        device=str(device),
        dtype=str(dtype).replace("torch.", ""),
        tolerance=tolerance,
        loss=loss_comparison,
        gradients=gradients,
        buffers=buffers,
        attributes=attributes,
        rng=rng,
        memory=MemoryReport(activations, peak),
        time=timing,
        recomputation=recomputation,
        findings=ordered,
        notes=tuple(notes_list),
        duration_s=time.perf_counter() - started,
        timelines=timelines,
        regions=regions,
        budget=budget,
    )


def _timed(step: Callable[[], Any], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started


def _recomputation(
    calls: list[RegionCall],
    baseline_forwards: int,
    checkpointed_forwards: int,
    region_recomputes: int,
    baseline_origin: str | None = None,
) -> Recomputation:
    """What the step recomputed; a baseline (checkpointing switched off) that still recomputes
    is checkpointed by something ckptlint cannot switch off, and cannot be compared."""
    if baseline_forwards:
        raise VerifyError(cannot_switch_off(baseline_forwards, baseline_origin))
    return Recomputation(
        regions=len(calls),
        reentrant_regions=sum(c.implementation == "reentrant" for c in calls),
        baseline_module_forwards=baseline_forwards,
        checkpointed_module_forwards=checkpointed_forwards,
        checkpointed_region_recomputes=region_recomputes,
    )


def cannot_switch_off(forwards: int, origin: str | None) -> str:
    """Backward recomputed with torch's checkpoint switched off: say which code did it."""
    where = f" by {origin}" if origin else ""
    if origin and "torch" + os.sep + "utils" + os.sep + "checkpoint.py" in origin.replace("/", os.sep):
        return (
            f"with torch.utils.checkpoint switched off, backward still re-ran {forwards} module forward(s){where}: "
            f"torch {torch.__version__} checkpoints through a path of its own that ckptlint does not switch off "
            f"({TESTED_TORCH_RELEASES})"
        )
    return (
        f"with torch.utils.checkpoint switched off, backward still re-ran {forwards} module forward(s){where}: the "
        "model checkpoints through an implementation that does not go through torch.utils.checkpoint, which "
        "ckptlint cannot switch off"
    )


def _memory_warnings(
    activations: MemoryFigure, peak: MemoryFigure | None, findings: list[Finding], calls: list[RegionCall] | None = None
) -> None:
    """Warnings only for differences that matter at the step's own scale: a saving under
    LOW_SAVING of the activations, a peak that rises by more than PEAK_RISE of its baseline."""
    if activations.saving < LOW_SAVING:
        findings.append(
            Finding(
                WARNING,
                None,
                "memory",
                f"checkpointing saves {activations.saving:.1%} of the activation memory held between forward and "
                f"backward ({format_bytes(activations.baseline_bytes)} -> {format_bytes(activations.checkpointed_bytes)}): the "
                "checkpointed regions are not where the activations are, or they are too small to matter",
            )
        )
    if peak is not None and peak.checkpointed_bytes - peak.baseline_bytes > PEAK_RISE * peak.baseline_bytes:
        sequential = any("checkpoint_sequential" in c.description for c in calls or ())
        why = (
            "checkpoint_sequential's segments are recomputed whole, so a segment's activations and the gradients "
            "already computed are held together (fewer, larger segments raise the peak; per-layer regions keep it low)"
            if sequential
            else "a region's recomputation allocates its activations again while backward already holds gradients "
            "and the saved inputs; per-region figures (regions) show which region is largest"
        )
        findings.append(
            Finding(
                WARNING,
                None,
                "memory",
                f"the peak memory rises with checkpointing ({format_bytes(peak.baseline_bytes)} -> "
                f"{format_bytes(peak.checkpointed_bytes)}, {-peak.saving:.0%} more): {why}",
            )
        )


