"""The two runs of a step compared: loss, gradients, buffers, module attributes, RNG.

Each comparison appends its findings, marked as causes (what explains a failure: RNG not
preserved, a rebound closure, state changed twice, no input grads) or symptoms (the
differences a cause explains); `_ranking.rank_findings` orders them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ckptlint.runtime_check._hazards import (
    CHECKPOINTED_BATCHNORM,
    INPUTS_WITHOUT_GRAD,
    LATE_BINDING_CLOSURE,
    RNG_NOT_PRESERVED,
    STATEFUL_FORWARD,
    STATE_CHANGED_BEFORE_BACKWARD,
    inputs_without_grad_code,
)
from ckptlint.runtime_check._regions import Cause, RegionCall, modules_named
from ckptlint.runtime_check._state import render_plain
from ckptlint.runtime_check._types import (
    CAUSE,
    ERROR,
    SYMPTOM,
    AttributeChange,
    BufferComparison,
    Finding,
    GradientComparison,
    LossComparison,
    RngComparison,
    TensorMismatch,
    Tolerance,
)


# Causes found in what the step left behind: state or buffers updated twice.
STATE_CODES = (CHECKPOINTED_BATCHNORM, STATEFUL_FORWARD)


@dataclass
class RunOutcome:
    """What one run left behind."""

    loss: float
    grads: dict[str, torch.Tensor | None]
    buffers: dict[str, torch.Tensor]
    attributes: dict[tuple[str, str], tuple]
    rng: dict[str, torch.Tensor]


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


def compare_loss(source: str, baseline: RunOutcome, checkpointed: RunOutcome, tolerance: Tolerance, findings: list[Finding]) -> LossComparison:
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


def compare_rng(baseline: RunOutcome, checkpointed: RunOutcome, no_rng: list[RegionCall], findings: list[Finding]) -> RngComparison:
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
                RNG_NOT_PRESERVED,
                "rng",
                f"the {', '.join(mismatched)} random generator state after the checkpointed step differs from the step "
                f"without checkpointing: {why}",
                role=CAUSE,
            )
        )
    return RngComparison(generators, mismatched)


def compare_gradients(
    baseline: RunOutcome,
    checkpointed: RunOutcome,
    tolerance: Tolerance,
    causes: list[Cause],
    frozen: list[RegionCall],
    frozen_count: int,
    rng_differs: bool,
    findings: list[Finding],
    state_code: str | None = None,
) -> GradientComparison:
    """`frozen`: the reentrant calls of the baseline whose inputs need no grad (the first of
    them is the cause); `frozen_count`: how many the checkpointed run had (the first one's
    output needs no grad either, so the next region's input does not, and so on);
    `state_code`: CKPT010/CKPT011 when buffers or attributes were found changed twice (the
    recomputation ran with the changed state: that explains the gradients)."""
    late_binding = [c for c in causes if c.code == LATE_BINDING_CLOSURE]
    mutated = [c for c in causes if c.code == STATE_CHANGED_BEFORE_BACKWARD]
    without_grad_code = inputs_without_grad_code(frozen[0].from_hugging_face) if frozen else None
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
            return LATE_BINDING_CLOSURE
        if mismatch.kind == "missing_checkpointed" and frozen:
            return without_grad_code
        if rng_differs:
            return RNG_NOT_PRESERVED
        if mismatched and mutated:
            return STATE_CHANGED_BEFORE_BACKWARD
        return state_code

    coded = [
        TensorMismatch(m.name, m.kind, m.max_abs_diff, m.max_rel_diff, m.baseline, m.checkpointed, code_for(m))
        for m in mismatched
    ]
    for mismatch in coded:
        findings.append(Finding(ERROR, mismatch.code, mismatch.name, _gradient_message(mismatch), role=SYMPTOM))
    if coded:
        for cause in late_binding or mutated:
            findings.append(Finding(ERROR, cause.code, cause.subject, cause.message, role=CAUSE))
        if frozen and any(m.kind == "missing_checkpointed" for m in coded):
            findings.append(
                Finding(
                    ERROR,
                    without_grad_code,
                    frozen[0].module or frozen[0].description,
                    f"{frozen_count} reentrant checkpoint call(s) received no input that requires grad (first: "
                    f"{frozen[0].description}): a reentrant region's output then needs no gradient, backward never "
                    "reaches it, and the parameters inside get none. "
                    + (
                        "Call model.enable_input_require_grads() (the embeddings are frozen) or checkpoint non-reentrant"
                        if without_grad_code == INPUTS_WITHOUT_GRAD
                        else "Make an input require grad or pass use_reentrant=False"
                    ),
                    role=CAUSE,
                )
            )
        if not (late_binding or mutated or frozen or rng_differs or state_code):
            findings.append(
                Finding(
                    ERROR,
                    None,
                    "recomputation",
                    "the recomputation in backward computed something other than the forward: look for a closure "
                    f"over a loop variable ({LATE_BINDING_CLOSURE}) or state read by a checkpointed region and changed before "
                    f"backward ({STATE_CHANGED_BEFORE_BACKWARD})",
                    role=CAUSE,
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


def compare_buffers(
    baseline: RunOutcome,
    checkpointed: RunOutcome,
    tolerance: Tolerance,
    modules: dict[str, torch.nn.Module],
    findings: list[Finding],
) -> BufferComparison:
    mismatched: list[TensorMismatch] = []
    names = list(baseline.buffers) + [n for n in checkpointed.buffers if n not in baseline.buffers]
    for name in names:
        a, b = baseline.buffers.get(name), checkpointed.buffers.get(name)
        owner = name.rpartition(".")[0]
        code = CHECKPOINTED_BATCHNORM if _is_running_stats_norm(modules.get(owner)) else STATEFUL_FORWARD
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

    # One cause per kind: a ResNet's BatchNorm layers are one finding naming them all.
    by_code: dict[str, dict[str, list[TensorMismatch]]] = {}
    for mismatch in mismatched:
        by_code.setdefault(mismatch.code or "", {}).setdefault(mismatch.module or "", []).append(mismatch)
    for code, by_module in by_code.items():
        findings.append(_buffer_cause(code, by_module, modules))
    return BufferComparison(len(names), tuple(mismatched))


def _buffer_cause(code: str, by_module: dict[str, list[TensorMismatch]], modules: dict[str, torch.nn.Module]) -> Finding:
    """One cause for the modules whose buffers differ in one way, detailed on the first."""
    owners = [owner or "(model)" for owner in by_module]
    first = next(iter(by_module.values()))
    kinds = sorted({type(modules[o]).__name__ if modules.get(o) is not None else "?" for o in by_module})
    details = "; ".join(_buffer_detail(m) for m in first)
    if len(owners) == 1:
        label, verb, again = f"module '{owners[0]}' ({kinds[0]})", "updated its", "this layer's forward"
        runs = "Its forward updates them in place and recomputation in backward ran it again"
    else:
        label, verb, again = f"{len(owners)} modules ({', '.join(kinds)}: {modules_named(owners)})", "updated their", "each layer's forward"
        runs = "Their forwards update them in place and recomputation in backward ran them again"
        details = f"in '{owners[0]}', {details}"
    if code == CHECKPOINTED_BATCHNORM:
        message = (
            f"{label} {verb} running statistics twice: {details}. Backward recomputed the checkpointed region in "
            f"training mode and ran {again} again; keep BatchNorm-style layers with running stats out of checkpointed "
            "regions, or use GroupNorm/LayerNorm"
        )
    else:
        message = f"{label} {'ends' if len(owners) == 1 else 'end'} the step with different buffers: {details}. {runs}"
    return Finding(ERROR, first[0].code, owners[0], message, role=CAUSE)


def _buffer_detail(mismatch: TensorMismatch) -> str:
    short = mismatch.name.rpartition(".")[2]
    if mismatch.kind == "value" and mismatch.baseline.startswith("norm"):
        return f"{short} differs by up to {mismatch.max_abs_diff:.3g}"
    return f"{short} is {mismatch.checkpointed} with checkpointing, {mismatch.baseline} without"


def compare_attributes(
    baseline: RunOutcome, checkpointed: RunOutcome, modules: dict[str, torch.nn.Module], findings: list[Finding]
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
                STATEFUL_FORWARD,
                f"{change.module}.{attribute}",
                f"module '{change.module}' ({type(module).__name__ if module is not None else '?'}): attribute "
                f"`{attribute}` is {change.checkpointed} after the checkpointed step and {change.baseline} without "
                "checkpointing: the forward changes Python state, and recomputation in backward ran it again",
                role=CAUSE,
            )
        )
    return tuple(changes)
