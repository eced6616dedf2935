"""The replay protocol: one sequence of runs for every kind of step.

A warm-up with checkpointing off; the measured step without checkpointing (the region
recorder, the saved-tensor and peak meters, the module-recompute counter; what the regions
read is looked at again just before backward); the measured step as configured (the same
meters, each region's recomputations counted); then `repeat` timed pairs, interleaved.
`measure` runs them on any `ReplayableStep` - a model and its inputs (`ModelStep`), a
training script (`ScriptStep`), one rank of a sharded step (`RankStep`) - and hands back
what they measured (`Measured`); each caller compares and reports in its own terms (one
process's `Report`, a rank's `RankOutcome`). What differs between the steps is theirs: how a
run is started, restored and watched (`StepWatch.label` names it: the rank's journal and
collective counter follow it), which saved tensors are activations, what the regions ran.
"""

from __future__ import annotations

import contextlib
import gc
from collections import Counter
from dataclasses import dataclass
from typing import Iterator

import torch

from ckptlint.runtime_check._hazards import KWARGS_TO_REENTRANT
from ckptlint.runtime_check._compare import RunOutcome
from ckptlint.runtime_check._journal import first_paragraph
from ckptlint.runtime_check._memory import PeakMeter, SavedTensorMeter
from ckptlint.runtime_check._regions import Cause, RegionCall, RegionRecorder
from ckptlint.runtime_check._replay import ReplayableStep, StepWatch
from ckptlint.runtime_check._switch import ModuleRecomputes, RegionRecomputes, checkpointing_counted, checkpointing_disabled
from ckptlint.runtime_check._types import NoCheckpointingFound, Tolerance, VerifyError

WARM_UP, BASELINE, CHECKPOINTED = "warm-up", "baseline", "checkpointed"
NO_CHECKPOINT_CALL = (
    "no checkpointing found: the step made no torch.utils.checkpoint call and backward recomputed "
    "nothing, so there is nothing to verify (checkpoint implementations that bypass "
    "torch.utils.checkpoint, such as DeepSpeed's, are not seen)"
)

# torch.testing's defaults, for everything that is not float32/float64 on CPU.
DTYPE_TOLERANCES = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
}


@dataclass
class Measured:
    """What one replay measured. `checkpointed` is None when the step as configured raised
    (`checkpointed_error`, the finding); its timed steps are then not taken."""

    device: torch.device
    dtype: torch.dtype
    tolerance: Tolerance
    baseline: RunOutcome
    checkpointed: RunOutcome | None
    checkpointed_error: Exception | None
    calls: list[RegionCall]
    causes: list[Cause]
    baseline_meter: SavedTensorMeter
    checkpointed_meter: SavedTensorMeter
    baseline_peak: PeakMeter
    checkpointed_peak: PeakMeter
    baseline_recomputes: ModuleRecomputes
    checkpointed_recomputes: ModuleRecomputes
    region_recomputes: RegionRecomputes
    baseline_times: list[float]
    checkpointed_times: list[float]
    recompute_samples: list[dict[int, float]]
    modules: dict[str, torch.nn.Module]
    model_name: str


def measure(step: ReplayableStep, *, rtol: float | None, atol: float | None, repeat: int, measure_peak: bool) -> Measured:
    """The runs of the protocol, inside `step.session()`."""
    if repeat < 1:
        raise VerifyError("repeat must be at least 1")
    with step.session():
        # Warm-up (lazy initialisation, allocator, the loss projection), checkpointing off.
        try:
            step.run(checkpointing_disabled(RegionRecorder(step.names, watch=False), step.checkpoint_gate), StepWatch(label=WARM_UP))
        except VerifyError:
            raise
        except Exception as error:
            raise warm_up_failure(error) from error
        assert step.model is not None
        parameters = list(step.model.named_parameters())
        device, dtype = first_device(parameters), main_dtype(parameters)
        tolerance = tolerance_for(device, dtype, rtol, atol)

        gc.collect(1)  # young garbage freed mid-step would blur the profiler's figures
        recorder = RegionRecorder(step.names)
        causes: list[Cause] = []
        baseline_meter, baseline_peak = step.saved_tensor_meter(recorder.running), PeakMeter(device, measure_peak)
        baseline_recomputes = ModuleRecomputes()

        def before_backward() -> None:
            causes.extend(recorder.causes())
            step.regions_ran(recorder)
            recorder.release()
            baseline_meter.start_backward()

        try:
            baseline = step.run(
                checkpointing_disabled(recorder, step.checkpoint_gate),
                StepWatch(
                    (baseline_recomputes, baseline_peak, baseline_meter),
                    before_backward,
                    baseline_peak.backward_marker,
                    repeat,
                    BASELINE,
                ),
            )
            baseline_later = step.later_step_seconds
        except VerifyError:
            raise
        except Exception as error:
            raise VerifyError(
                f"the training step without checkpointing fails while measured: {type(error).__name__}: "
                f"{first_paragraph(error)}"
            ) from error
        calls = list(recorder.calls)
        if step.stops_without_checkpointing and not calls and not baseline_recomputes.count:
            raise NoCheckpointingFound(NO_CHECKPOINT_CALL)  # nothing to switch off: stop before timing anything

        gc.collect(1)
        region_recomputes = RegionRecomputes(device)
        checkpointed_meter, checkpointed_peak = step.saved_tensor_meter(None), PeakMeter(device, measure_peak)
        checkpointed_recomputes = ModuleRecomputes()
        checkpointed: RunOutcome | None = None
        checkpointed_error: Exception | None = None
        checkpointed_later: tuple[float, ...] = ()
        try:
            checkpointed = step.run(
                checkpointing_counted(region_recomputes, step.checkpoint_gate),
                StepWatch(
                    (checkpointed_recomputes, checkpointed_peak, checkpointed_meter),
                    checkpointed_meter.start_backward,
                    checkpointed_peak.backward_marker,
                    repeat,
                    CHECKPOINTED,
                ),
            )
            checkpointed_later = step.later_step_seconds
        except VerifyError:
            raise
        except Exception as error:  # the failure is the finding
            if step.raises_checkpointed_failure:
                raise
            checkpointed_error = error

        baseline_times: list[float] = []
        checkpointed_times: list[float] = []
        recompute_samples = [region_recomputes.seconds()]
        gc.collect()
        with _collector_paused():  # as timeit does: a collection inside one step is noise
            for index in range(repeat):
                if checkpointed_error is None and index < min(len(baseline_later), len(checkpointed_later)):
                    # A script timed its next steps after each measured one: no run of its own.
                    baseline_times.append(baseline_later[index])
                    checkpointed_times.append(checkpointed_later[index])
                    continue
                baseline_times.append(step.timed(checkpointing_disabled(RegionRecorder(step.names, watch=False), step.checkpoint_gate)))
                if checkpointed_error is None:
                    timed_recomputes = RegionRecomputes(device)
                    checkpointed_times.append(step.timed(checkpointing_counted(timed_recomputes, step.checkpoint_gate)))
                    recompute_samples.append(timed_recomputes.seconds())
        modules = step.modules_by_name()
        model_name = step.model_name
    return Measured(
        device=device,
        dtype=dtype,
        tolerance=tolerance,
        baseline=baseline,
        checkpointed=checkpointed,
        checkpointed_error=checkpointed_error,
        calls=calls,
        causes=causes,
        baseline_meter=baseline_meter,
        checkpointed_meter=checkpointed_meter,
        baseline_peak=baseline_peak,
        checkpointed_peak=checkpointed_peak,
        baseline_recomputes=baseline_recomputes,
        checkpointed_recomputes=checkpointed_recomputes,
        region_recomputes=region_recomputes,
        baseline_times=baseline_times,
        checkpointed_times=checkpointed_times,
        recompute_samples=recompute_samples,
        modules=modules,
        model_name=model_name,
    )


def warm_up_failure(error: Exception) -> VerifyError:
    """The step fails with checkpointing off: nothing to compare (exit 2), with a hint when
    the error is CKPT032's."""
    hint = ""
    if str(error).startswith("Unexpected keyword arguments"):
        hint = f" ({KWARGS_TO_REENTRANT}: keyword arguments passed to a reentrant checkpoint)"
    return VerifyError(
        f"the training step fails with checkpointing switched off, so there is nothing to compare: "
        f"{type(error).__name__}: {first_paragraph(error)}{hint}"
    )


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def first_device(parameters: list[tuple[str, torch.nn.Parameter]]) -> torch.device:
    for _, parameter in parameters:
        return parameter.device
    return torch.device("cpu")


def main_dtype(parameters: list[tuple[str, torch.nn.Parameter]]) -> torch.dtype:
    counts = Counter(p.dtype for _, p in parameters if p.requires_grad and p.is_floating_point())
    return counts.most_common(1)[0][0] if counts else torch.float32


def tolerance_for(device: torch.device, dtype: torch.dtype, rtol: float | None, atol: float | None) -> Tolerance:
    if rtol is not None or atol is not None:
        return Tolerance(float(rtol or 0.0), float(atol or 0.0), "rtol/atol given")
    name = str(dtype).replace("torch.", "")
    if device.type == "cpu" and dtype in (torch.float32, torch.float64):
        return Tolerance(0.0, 0.0, f"exact (CPU {name} recomputation is deterministic)")
    rtol_default, atol_default = DTYPE_TOLERANCES.get(dtype, (1.3e-6, 1e-5))
    return Tolerance(rtol_default, atol_default, f"{name} on {device.type}")
