"""The replay: one step without checkpointing, the same step as configured, compared.

Both runs start from the same snapshot (parameters, buffers, plain attributes, RNG) in the
same train/eval mode. Sequence: a warm-up step, the two measured runs (saved-tensor meter,
peak meter, recompute counters), then `repeat` timed steps of each; the snapshot is restored
before every run and, with the user's own gradients, at the end.
"""

from __future__ import annotations

import contextlib
import gc
import math
import sys
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import torch

from ckptlint.runtime_check._memory import PeakMeter, SavedTensorMeter
from ckptlint.runtime_check._render import format_bytes
from ckptlint.runtime_check._regions import Cause, RegionCall, RegionRecorder
from ckptlint.runtime_check._state import ModelSnapshot, RngState, attribute_fingerprints, render_plain
from ckptlint.runtime_check._step import StepInputs, StepLoss, run_step
from ckptlint.runtime_check._switch import (
    ModuleRecomputes,
    RegionRecomputes,
    checkpointing_counted,
    checkpointing_disabled,
)
from ckptlint.runtime_check._types import (
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
    Report,
    RngComparison,
    Series,
    TensorMismatch,
    Timelines,
    Timing,
    Tolerance,
    VerifyError,
)

LOW_SAVING = 0.10

# torch.testing's defaults, for everything that is not float32/float64 on CPU.
_DTYPE_TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}


def verify(
    model: torch.nn.Module,
    inputs: Any,
    loss_fn: Callable[[Any], torch.Tensor] | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    repeat: int = 2,
    measure_peak: bool = True,
    target: str | None = None,
) -> Report:
    """Replay one training step of `model` on `inputs` with and without checkpointing.

    `inputs`: a tensor (the one positional argument), a tuple of positional arguments, or a
    dict of keyword arguments. `loss_fn(output) -> scalar`; without it, `output.loss` when
    present, else a fixed random projection of every floating output. `rtol`/`atol` replace
    the dtype-derived tolerance (exact for float32/float64 on CPU). `repeat`: timed steps of
    each kind. `measure_peak`: also measure the peak (CPU: one profiled step of each kind).

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
    )


@dataclass
class _Outcome:
    """What one run left behind."""

    loss: float
    grads: dict[str, torch.Tensor | None]
    buffers: dict[str, torch.Tensor]
    attributes: dict[tuple[str, str], tuple]
    rng: dict[str, torch.Tensor]


def verify_step(
    model: torch.nn.Module,
    inputs: StepInputs,
    loss_fn: Callable[[Any], torch.Tensor] | None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    repeat: int = 2,
    measure_peak: bool = True,
    target: str | None = None,
    notes: tuple[str, ...] = (),
    autocast: tuple[tuple[str, torch.dtype], ...] = (),
) -> Report:
    """`verify` for inputs already split into positional and keyword arguments; `autocast`
    replays the forward under `torch.autocast` (script mode, when the script used it)."""
    started = time.perf_counter()
    notes_list = list(notes)
    if not isinstance(model, torch.nn.Module):
        raise VerifyError(f"`model` must be a torch.nn.Module, not {type(model).__name__}")
    model = _eager_module(model, notes_list)
    if repeat < 1:
        raise VerifyError("repeat must be at least 1")
    parameters = list(model.named_parameters())
    if not any(p.requires_grad for _, p in parameters):
        raise VerifyError("the model has no parameter that requires grad: there is no training step to verify")
    inputs = inputs.detached()
    names = {id(module): name for name, module in model.named_modules()}
    modules = list(model.named_modules())
    device = _device(parameters, inputs)
    dtype = _dtype(parameters)
    tolerance = _tolerance(device, dtype, rtol, atol)
    loss = StepLoss(loss_fn)
    leaves = inputs.named_leaves()
    snapshot = ModelSnapshot(model, inputs.tensors())

    def outcome(value: torch.Tensor) -> _Outcome:
        grads: dict[str, torch.Tensor | None] = {name: p.grad for name, p in parameters if p.requires_grad}
        grads.update({name: t.grad for name, t in leaves})
        with torch.no_grad():
            buffers = {name: b.detach().clone() for name, b in model.named_buffers()}
        return _Outcome(float(value), grads, buffers, attribute_fingerprints(modules), RngState.torch_states())

    try:
        with _eager_stance(model, notes_list):
            # Warm-up (lazy initialisation, allocator, the loss projection), checkpointing off.
            snapshot.prepare_run()
            try:
                with checkpointing_disabled(RegionRecorder(names, watch=False)):
                    run_step(model, inputs, loss, autocast=autocast)
            except VerifyError:
                raise
            except Exception as error:
                hint = ""
                if str(error).startswith("Unexpected keyword arguments"):
                    hint = " (CKPT032: keyword arguments passed to a reentrant checkpoint)"
                raise VerifyError(
                    f"the training step fails with checkpointing switched off, so there is nothing to compare: "
                    f"{type(error).__name__}: {_first_paragraph(error)}{hint}"
                ) from error

            excluded = snapshot.storage_pointers()
            gc.collect(1)  # young garbage freed mid-step would blur the profiler's figures
            snapshot.prepare_run()
            recorder = RegionRecorder(names)
            causes: list[Cause] = []
            baseline_meter, baseline_peak = SavedTensorMeter(excluded), PeakMeter(device, measure_peak)
            baseline_recomputes = ModuleRecomputes()

            def before_backward() -> None:
                causes.extend(recorder.causes())
                recorder.release()
                baseline_meter.start_backward()

            try:
                with checkpointing_disabled(recorder), baseline_recomputes, baseline_peak, baseline_meter:
                    baseline_loss = run_step(
                        model,
                        inputs,
                        loss,
                        on_backward=before_backward,
                        backward_context=baseline_peak.backward_marker(),
                        autocast=autocast,
                    )
            except Exception as error:
                raise VerifyError(
                    f"the training step without checkpointing fails while measured: {type(error).__name__}: "
                    f"{_first_paragraph(error)}"
                ) from error
            baseline = outcome(baseline_loss)
            calls = list(recorder.calls)

            gc.collect(1)
            snapshot.prepare_run()
            region_recomputes = RegionRecomputes()
            checkpointed_meter, checkpointed_peak = SavedTensorMeter(excluded), PeakMeter(device, measure_peak)
            checkpointed_recomputes = ModuleRecomputes()
            checkpointed: _Outcome | None = None
            checkpointed_error: Exception | None = None
            try:
                with (
                    checkpointing_counted(region_recomputes),
                    checkpointed_recomputes,
                    checkpointed_peak,
                    checkpointed_meter,
                ):
                    checkpointed_loss = run_step(
                        model,
                        inputs,
                        loss,
                        on_backward=checkpointed_meter.start_backward,
                        backward_context=checkpointed_peak.backward_marker(),
                        autocast=autocast,
                    )
                checkpointed = outcome(checkpointed_loss)
            except Exception as error:  # the failure is the finding
                checkpointed_error = error

            baseline_times, checkpointed_times = [], []
            for _ in range(repeat):
                snapshot.prepare_run()
                with checkpointing_disabled(RegionRecorder(names, watch=False)):
                    baseline_times.append(_timed(lambda: run_step(model, inputs, loss, autocast=autocast), device))
                if checkpointed_error is None:
                    snapshot.prepare_run()
                    checkpointed_times.append(_timed(lambda: run_step(model, inputs, loss, autocast=autocast), device))
    finally:
        snapshot.restore()

    recomputation = _recomputation(calls, baseline_recomputes.count, checkpointed_recomputes.count, region_recomputes.count)

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
                f"checkpointing runs: {_first_paragraph(checkpointed_error)}",
            )
        )
        findings.extend(Finding(ERROR, c.code, c.subject, c.message) for c in causes)
        loss_comparison = LossComparison(loss.source, baseline.loss, None, None, False)
        gradients = GradientComparison(0, 0.0, 0.0, ())
        buffers = BufferComparison(len(baseline.buffers), ())
        attributes: tuple[AttributeChange, ...] = ()
        rng = RngComparison(tuple(baseline.rng), ())
    else:
        loss_comparison = _compare_loss(loss.source, baseline, checkpointed, tolerance, findings)
        rng = _compare_rng(baseline, checkpointed, no_rng, findings)
        gradients = _compare_gradients(
            baseline,
            checkpointed,
            tolerance,
            causes,
            frozen,
            max(len(frozen), region_recomputes.reentrant_without_grad_inputs),
            bool(rng.mismatched),
            findings,
        )
        buffers = _compare_buffers(baseline, checkpointed, tolerance, dict(modules), findings)
        attributes = _compare_attributes(baseline, checkpointed, dict(modules), findings)

    recomputed = recomputation.checkpointed_module_forwards + recomputation.checkpointed_region_recomputes
    has_errors = any(f.severity == ERROR for f in findings)
    if checkpointed is not None and recomputed == 0:
        if not calls:
            raise NoCheckpointingFound(
                "no checkpointing found: the step made no torch.utils.checkpoint call and backward recomputed "
                "nothing, so there is nothing to verify (checkpoint implementations that bypass "
                "torch.utils.checkpoint, such as DeepSpeed's, are not seen)"
            )
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
        _memory_warnings(activations, peak, findings)
    timing = Timing(min(baseline_times), min(checkpointed_times) if checkpointed_times else 0.0, repeat)

    kinds = Counter(c.implementation for c in calls)
    notes_list.append(
        f"{len(calls)} checkpoint call(s) in the step ("
        + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        + f"); backward re-ran {recomputation.checkpointed_region_recomputes} checkpointed function(s) and "
        f"{recomputation.checkpointed_module_forwards} module forward(s)"
    )
    if not loss.source.startswith("loss_fn"):
        notes_list.append(f"loss: {loss.source}")

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
    ordered = sorted(findings, key=lambda f: (f.severity != ERROR, f.code is None, f.code or "", f.subject))
    return Report(
        verdict=FAIL if any(f.severity == ERROR for f in ordered) else PASS,
        target=target or type(model).__name__,
        model=type(model).__name__,
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
        findings=tuple(ordered),
        notes=tuple(notes_list),
        duration_s=time.perf_counter() - started,
        timelines=timelines,
    )


# --- the model as it runs eagerly ------------------------------------------------------------


def _optimized_module_type() -> type | None:
    if "torch._dynamo" not in sys.modules:
        return None
    return getattr(sys.modules["torch._dynamo"].eval_frame, "OptimizedModule", None)


def _eager_module(model: torch.nn.Module, notes: list[str]) -> torch.nn.Module:
    """Compiled graphs ignore runtime patches (EVIDENCE Q7): verify the eager module."""
    optimized = _optimized_module_type()
    while True:
        if optimized is not None and isinstance(model, optimized):
            model = model._orig_mod
            notes.append(
                "the model is torch.compile'd: verified its eager module (`_orig_mod`), since checkpointing "
                "inside a compiled graph cannot be switched off at runtime"
            )
        elif isinstance(model, (torch.nn.DataParallel, torch.nn.parallel.DistributedDataParallel)):
            model = model.module
            notes.append(f"verified the module inside {type(model).__name__} (`.module`)")
        else:
            return model


@contextlib.contextmanager
def _eager_stance(model: torch.nn.Module, notes: list[str]) -> Iterator[None]:
    """Compiled submodules (`torch.compile(block)`, `module.compile()`) run eagerly too."""
    optimized = _optimized_module_type()
    compiled = [
        name or "(model)"
        for name, module in model.named_modules()
        if (optimized is not None and isinstance(module, optimized)) or vars(module).get("_compiled_call_impl") is not None
    ]
    if not compiled:
        yield
        return
    notes.append(f"compiled module(s) {', '.join(compiled[:5])} ran eagerly (torch.compiler stance force_eager)")
    with torch.compiler.set_stance("force_eager"):
        yield


def _device(parameters: list[tuple[str, torch.nn.Parameter]], inputs: StepInputs) -> torch.device:
    for _, parameter in parameters:
        return parameter.device
    for tensor in inputs.tensors():
        return tensor.device
    return torch.device("cpu")


def _dtype(parameters: list[tuple[str, torch.nn.Parameter]]) -> torch.dtype:
    counts = Counter(p.dtype for _, p in parameters if p.requires_grad and p.is_floating_point())
    return counts.most_common(1)[0][0] if counts else torch.float32


def _tolerance(device: torch.device, dtype: torch.dtype, rtol: float | None, atol: float | None) -> Tolerance:
    if rtol is not None or atol is not None:
        return Tolerance(float(rtol or 0.0), float(atol or 0.0), "rtol/atol given")
    name = str(dtype).replace("torch.", "")
    if device.type == "cpu" and dtype in (torch.float32, torch.float64):
        return Tolerance(0.0, 0.0, f"exact (CPU {name} recomputation is deterministic)")
    rtol_default, atol_default = _DTYPE_TOLERANCES.get(dtype, (1.3e-6, 1e-5))
    return Tolerance(rtol_default, atol_default, f"{name} on {device.type}")


def _timed(step: Callable[[], Any], device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    started = time.perf_counter()
    step()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - started


# --- comparisons ------------------------------------------------------------------------------


def _differences(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    wide = torch.float64 if a.dtype == torch.float64 else torch.float32
    a, b = a.detach().to(wide), b.detach().to(wide)
    if a.numel() == 0:
        return 0.0, 0.0
    difference = (a - b).abs().nan_to_num(nan=math.inf).max().item()
    scale = a.abs().max().item()
    if difference == 0:
        return 0.0, 0.0
    return difference, (difference / scale if scale > 0 else math.inf)


def _close(a: torch.Tensor, b: torch.Tensor, tolerance: Tolerance) -> bool:
    if not (a.is_floating_point() or a.is_complex()):
        return torch.equal(a, b)
    return bool(torch.isclose(a, b, rtol=tolerance.rtol, atol=tolerance.atol, equal_nan=True).all())


def _summary(tensor: torch.Tensor | None) -> str:
    if tensor is None:
        return "None"
    if tensor.numel() == 1:
        value = tensor.item()
        return f"{value:.6g}" if isinstance(value, float) else str(value)
    if tensor.is_floating_point():
        return f"norm {tensor.detach().float().norm().item():.6g}"
    return f"sum {tensor.sum().item()}"


def _recomputation(
    calls: list[RegionCall], baseline_forwards: int, checkpointed_forwards: int, region_recomputes: int
) -> Recomputation:
    """What the step recomputed; a baseline (checkpointing switched off) that still recomputes
    is checkpointed by something ckptlint cannot switch off, and cannot be compared."""
    if baseline_forwards:
        raise VerifyError(
            f"with torch.utils.checkpoint switched off, backward still re-ran {baseline_forwards} "
            "module forward(s): the model checkpoints through an implementation that does not go through "
            "torch.utils.checkpoint (DeepSpeed, Megatron, fairscale), which ckptlint cannot switch off"
        )
    return Recomputation(
        regions=len(calls),
        reentrant_regions=sum(c.implementation == "reentrant" for c in calls),
        baseline_module_forwards=baseline_forwards,
        checkpointed_module_forwards=checkpointed_forwards,
        checkpointed_region_recomputes=region_recomputes,
    )


def _compare_loss(source: str, baseline: _Outcome, checkpointed: _Outcome, tolerance: Tolerance, findings: list[Finding]) -> LossComparison:
    a, b = torch.tensor(baseline.loss, dtype=torch.float64), torch.tensor(checkpointed.loss, dtype=torch.float64)
    matches = _close(a, b, tolerance)
    difference = abs(baseline.loss - checkpointed.loss)
    if not matches:
        findings.append(
            Finding(
                ERROR,
                None,
                "loss",
                f"the loss differs: {baseline.loss:.8g} without checkpointing, {checkpointed.loss:.8g} checkpointed "
                f"(diff {difference:.3g}): the checkpointed forward itself computes something else (code that "
                "branches on torch.is_grad_enabled(), False inside a reentrant region's forward, for example)",
            )
        )
    return LossComparison(source, baseline.loss, checkpointed.loss, difference, matches)


def _compare_rng(baseline: _Outcome, checkpointed: _Outcome, no_rng: list[RegionCall], findings: list[Finding]) -> RngComparison:
    generators = tuple(sorted(set(baseline.rng) | set(checkpointed.rng)))
    mismatched = tuple(
        g for g in generators if g not in baseline.rng or g not in checkpointed.rng or not torch.equal(baseline.rng[g], checkpointed.rng[g])
    )
    if mismatched:
        if no_rng:
            why = (
                f"recomputation drew fresh random numbers instead of replaying the forward's: {len(no_rng)} region(s) "
                f"run with preserve_rng_state=False (first: {no_rng[0].description}), so dropout masks differ between "
                "forward and recomputation and all later randomness shifts"
            )
        else:
            why = "backward consumed random numbers that the step without checkpointing did not"
        findings.append(
            Finding(
                ERROR,
                "CKPT033",
                "rng",
                f"the {', '.join(mismatched)} random generator state after the checkpointed step differs from the step "
                f"without checkpointing: {why}",
            )
        )
    return RngComparison(generators, mismatched)


def _compare_gradients(
    baseline: _Outcome,
    checkpointed: _Outcome,
    tolerance: Tolerance,
    causes: list[Cause],
    frozen: list[RegionCall],
    frozen_count: int,
    rng_differs: bool,
    findings: list[Finding],
) -> GradientComparison:
    """`frozen`: the reentrant calls of the baseline whose inputs need no grad (the first of
    them is the cause); `frozen_count`: how many the checkpointed run had (the first one's
    output needs no grad either, so the next region's input does not, and so on)."""
    late_binding = [c for c in causes if c.code == "CKPT030"]
    mutated = [c for c in causes if c.code == "CKPT031"]
    compared, largest_abs, largest_rel = 0, 0.0, 0.0
    mismatched: list[TensorMismatch] = []
    for name in baseline.grads:
        a, b = baseline.grads[name], checkpointed.grads.get(name)
        if a is None and b is None:
            continue
        compared += 1
        if a is None or b is None:
            kind = "missing_baseline" if a is None else "missing_checkpointed"
            mismatched.append(TensorMismatch(name, kind, None, None, _summary(a), _summary(b)))
            continue
        if a.shape != b.shape:
            mismatched.append(TensorMismatch(name, "shape", None, None, f"shape {list(a.shape)}", f"shape {list(b.shape)}"))
            continue
        absolute, relative = _differences(a, b)
        largest_abs, largest_rel = max(largest_abs, absolute), max(largest_rel, relative)
        if not _close(a, b, tolerance):
            mismatched.append(TensorMismatch(name, "value", absolute, relative, _summary(a), _summary(b)))

    def code_for(mismatch: TensorMismatch) -> str | None:
        if late_binding:
            return "CKPT030"
        if mismatch.kind == "missing_checkpointed" and frozen:
            return "CKPT021"
        if rng_differs:
            return "CKPT033"
        if mismatched and mutated:
            return "CKPT031"
        return None

    coded = [
        TensorMismatch(m.name, m.kind, m.max_abs_diff, m.max_rel_diff, m.baseline, m.checkpointed, code_for(m))
        for m in mismatched
    ]
    for mismatch in coded:
        findings.append(Finding(ERROR, mismatch.code, mismatch.name, _gradient_message(mismatch)))
    if coded:
        for cause in late_binding or mutated:
            findings.append(Finding(ERROR, cause.code, cause.subject, cause.message))
        if frozen and any(m.kind == "missing_checkpointed" for m in coded):
            findings.append(
                Finding(
                    ERROR,
                    "CKPT021",
                    frozen[0].module or frozen[0].description,
                    f"{frozen_count} reentrant checkpoint call(s) received no input that requires grad (first: "
                    f"{frozen[0].description}): a reentrant region's output then needs no gradient, backward never "
                    "reaches it, and the parameters inside get none. Make an input require grad (for frozen "
                    "embeddings: model.enable_input_require_grads()) or pass use_reentrant=False",
                )
            )
        if not (late_binding or mutated or frozen or rng_differs):
            findings.append(
                Finding(
                    ERROR,
                    None,
                    "recomputation",
                    "the recomputation in backward computed something other than the forward: look for a closure "
                    "over a loop variable (CKPT030) or state read by a checkpointed region and changed before "
                    "backward (CKPT031)",
                )
            )
    return GradientComparison(compared, largest_abs, largest_rel, tuple(coded))


def _gradient_message(mismatch: TensorMismatch) -> str:
    if mismatch.kind == "missing_checkpointed":
        text = f"`{mismatch.name}` gets no gradient with checkpointing (without: {mismatch.baseline})"
    elif mismatch.kind == "missing_baseline":
        text = f"`{mismatch.name}` gets a gradient only with checkpointing ({mismatch.checkpointed})"
    elif mismatch.kind == "shape":
        text = f"the gradient of `{mismatch.name}` has {mismatch.checkpointed} with checkpointing, {mismatch.baseline} without"
    else:
        text = (
            f"the gradient of `{mismatch.name}` differs: max abs diff {mismatch.max_abs_diff:.3g}, max rel diff "
            f"{mismatch.max_rel_diff:.3g} ({mismatch.baseline} without checkpointing, {mismatch.checkpointed} with)"
        )
    return text


def _is_running_stats_norm(module: torch.nn.Module | None) -> bool:
    return isinstance(module, torch.nn.modules.batchnorm._NormBase) and bool(getattr(module, "track_running_stats", False))


def _compare_buffers(
    baseline: _Outcome,
    checkpointed: _Outcome,
    tolerance: Tolerance,
    modules: dict[str, torch.nn.Module],
    findings: list[Finding],
) -> BufferComparison:
    mismatched: list[TensorMismatch] = []
    names = list(baseline.buffers) + [n for n in checkpointed.buffers if n not in baseline.buffers]
    for name in names:
        a, b = baseline.buffers.get(name), checkpointed.buffers.get(name)
        owner = name.rpartition(".")[0]
        code = "CKPT010" if _is_running_stats_norm(modules.get(owner)) else "CKPT011"
        if a is None or b is None:
            kind = "missing_baseline" if a is None else "missing_checkpointed"
            mismatched.append(TensorMismatch(name, kind, None, None, _summary(a), _summary(b), code, owner))
        elif a.shape != b.shape:
            mismatched.append(
                TensorMismatch(name, "shape", None, None, f"shape {list(a.shape)}", f"shape {list(b.shape)}", code, owner)
            )
        elif not _close(a, b, tolerance):
            absolute, relative = _differences(a, b)
            mismatched.append(TensorMismatch(name, "value", absolute, relative, _summary(a), _summary(b), code, owner))

    by_module: dict[str, list[TensorMismatch]] = {}
    for mismatch in mismatched:
        by_module.setdefault(mismatch.module or "", []).append(mismatch)
    for owner, items in by_module.items():
        module = modules.get(owner)
        label = f"module '{owner or '(model)'}' ({type(module).__name__ if module is not None else '?'})"
        details = "; ".join(_buffer_detail(m) for m in items)
        if items[0].code == "CKPT010":
            message = (
                f"{label} updated its running statistics twice: {details}. Backward recomputed the checkpointed "
                "region in training mode and ran this layer's forward again; keep BatchNorm-style layers with running "
                "stats out of checkpointed regions, or use GroupNorm/LayerNorm"
            )
        else:
            message = (
                f"{label} ends the step with different buffers: {details}. Its forward updates them in place and "
                "recomputation in backward ran it again"
            )
        findings.append(Finding(ERROR, items[0].code, owner or "(model)", message))
    return BufferComparison(len(names), tuple(mismatched))


def _buffer_detail(mismatch: TensorMismatch) -> str:
    short = mismatch.name.rpartition(".")[2]
    if mismatch.kind == "value" and mismatch.baseline.startswith("norm"):
        return f"{short} differs by up to {mismatch.max_abs_diff:.3g}"
    return f"{short} is {mismatch.checkpointed} with checkpointing, {mismatch.baseline} without"


def _compare_attributes(
    baseline: _Outcome, checkpointed: _Outcome, modules: dict[str, torch.nn.Module], findings: list[Finding]
) -> tuple[AttributeChange, ...]:
    changes = []
    for key in sorted(set(baseline.attributes) | set(checkpointed.attributes)):
        before, after = baseline.attributes.get(key), checkpointed.attributes.get(key)
        if before == after:
            continue
        owner, attribute = key
        change = AttributeChange(owner or "(model)", attribute, render_plain(before), render_plain(after))
        changes.append(change)
        module = modules.get(owner)
        findings.append(
            Finding(
                ERROR,
                "CKPT011",
                f"{change.module}.{attribute}",
                f"module '{change.module}' ({type(module).__name__ if module is not None else '?'}): attribute "
                f"`{attribute}` is {change.checkpointed} after the checkpointed step and {change.baseline} without "
                "checkpointing: the forward changes Python state, and recomputation in backward ran it again",
            )
        )
    return tuple(changes)


def _memory_warnings(activations: MemoryFigure, peak: MemoryFigure | None, findings: list[Finding]) -> None:
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
    if peak is not None and peak.checkpointed_bytes > peak.baseline_bytes:
        findings.append(
            Finding(
                WARNING,
                None,
                "memory",
                f"the peak memory rises with checkpointing ({format_bytes(peak.baseline_bytes)} -> "
                f"{format_bytes(peak.checkpointed_bytes)}): what recomputation allocates in backward outweighs the activations "
                "it saves (sqrt(L) groups of transformer blocks, for example, peak higher than checkpointing each "
                "layer)",
            )
        )


def _first_paragraph(error: BaseException) -> str:
    """torch's errors append pages of tips after a blank line; the first paragraph says it."""
    return str(error).strip().split("\n\n", 1)[0].replace("\n", " ")

