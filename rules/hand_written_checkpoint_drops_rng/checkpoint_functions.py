"""Which `torch.autograd.Function` subclasses of a file are hand-written checkpoints, and what
state their recomputation restores."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.cst_walk import descendants as _walk

# torch 2.13: `torch.autograd.Function` is `torch.autograd.function.Function`.
AUTOGRAD_FUNCTION = frozenset({"torch.autograd.Function", "torch.autograd.function.Function"})
NO_GRAD = frozenset({"torch.no_grad", "torch.autograd.no_grad", "torch.autograd.grad_mode.no_grad"})
ENABLE_GRAD = frozenset({"torch.enable_grad", "torch.autograd.enable_grad", "torch.autograd.grad_mode.enable_grad"})
SET_GRAD_ENABLED = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled", "torch.autograd.grad_mode.set_grad_enabled"})
AUTOGRAD_GRAD = frozenset({"torch.autograd.grad", "torch.autograd.backward"})

# A name of the class that says it keeps or restores the RNG state: torch's
# `get_rng_state` / `set_rng_state` / `fork_rng` / `get_device_states` / `preserve_rng_state`
# (its own CheckpointFunction, vendored), DeepSpeed's and Megatron's `_set_cuda_rng_state` /
# `get_cuda_rng_tracker()`, a project's `seed` / `generator` keeping. Any of them: silence.
_RNG_WORDS = re.compile(r"rng|seed|random_state|device_states|generator", re.IGNORECASE)


@dataclass(frozen=True)
class HandWrittenCheckpoint:
    """A Function whose `forward` runs a stored function under `no_grad` and whose
    `backward` runs it again with grad enabled and differentiates it."""

    node: cst.ClassDef
    function_attribute: str  # `ctx.<attr>` holding the function (`run_function`)
    restores_autocast: bool
    differentiates_params: bool  # `torch.autograd.grad` over tensors passed beside the inputs


# The absolute names an expression may refer to (`analysis.fsdp.absolute_names` of the file).
Names = Callable[["cst.BaseExpression"], set[str]]


def hand_written_checkpoint(node: cst.ClassDef, names: Names) -> HandWrittenCheckpoint | None:
    """`node` as a hand-written checkpoint that restores no RNG state, or None."""
    if not any(names(base.value) & AUTOGRAD_FUNCTION for base in node.bases):
        return None
    methods = {s.name.value: s for s in node.body.body if isinstance(s, cst.FunctionDef)}
    forward, backward = methods.get("forward"), methods.get("backward")
    if forward is None or backward is None or not forward.params.params or not backward.params.params:
        return None
    stored = _stored_functions(forward)
    if not stored:
        return None
    ran = {stored.get(called, called) for called in _calls_under(forward, names, _is_no_grad, stored)}
    rerun = [attr for attr in _calls_under(backward, names, _is_enable_grad, {}) if attr in ran and attr in stored.values()]
    if not rerun or not _differentiates(backward, names):
        return None
    if any(_RNG_WORDS.search(word) for word in _identifiers(node)):
        return None
    restores_autocast = any("autocast" in word.lower() for word in _identifiers(backward))
    return HandWrittenCheckpoint(node, rerun[0], restores_autocast, _differentiates_params(forward, backward, names))


def _ctx_name(function: cst.FunctionDef) -> str:
    return function.params.params[0].name.value


def _stored_functions(forward: cst.FunctionDef) -> dict[str, str]:
    """`ctx.<attr> = <parameter>` in `forward`: each parameter kept on `ctx`, with its attribute."""
    ctx = _ctx_name(forward)
    parameters = {p.name.value for p in forward.params.params[1:]}
    stored = {}
    for node in _walk(forward.body):
        if isinstance(node, cst.Assign) and isinstance(node.value, cst.Name) and node.value.value in parameters:
            for target in node.targets:
                if _is_ctx_attribute(target.target, ctx):
                    stored[node.value.value] = target.target.attr.value
    return stored


def _is_ctx_attribute(expr: cst.BaseExpression, ctx: str) -> bool:
    return isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == ctx


def _calls_under(
    function: cst.FunctionDef, names: Names, opens: Callable[[cst.WithItem, Names], bool], parameters: dict[str, str]
) -> Iterator[str]:
    """The `ctx.<attr>(...)` calls (and calls of the `parameters`, by name) inside a `with`
    block one of whose items `opens`."""
    ctx = _ctx_name(function)
    for block in _walk(function.body):
        if isinstance(block, cst.With) and any(opens(item, names) for item in block.items):
            for node in _walk(block.body):
                if isinstance(node, cst.Call) and _is_ctx_attribute(node.func, ctx):
                    yield node.func.attr.value
                elif isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in parameters:
                    yield node.func.value


def _is_no_grad(item: cst.WithItem, names: Names) -> bool:
    return isinstance(item.item, cst.Call) and bool(names(item.item.func) & NO_GRAD)


def _is_enable_grad(item: cst.WithItem, names: Names) -> bool:
    call = item.item
    if not isinstance(call, cst.Call):
        return False
    if names(call.func) & ENABLE_GRAD:
        return True
    return bool(names(call.func) & SET_GRAD_ENABLED) and len(call.args) == 1 and (
        isinstance(call.args[0].value, cst.Name) and call.args[0].value.value == "True"
    )


def _differentiates(backward: cst.FunctionDef, names: Names) -> bool:
    """`torch.autograd.grad(...)` / `torch.autograd.backward(...)` / `<out>.backward(...)`."""
    for node in _walk(backward.body):
        if isinstance(node, cst.Call):
            if names(node.func) & AUTOGRAD_GRAD:
                return True
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "backward":
                return True
    return False


def _differentiates_params(forward: cst.FunctionDef, backward: cst.FunctionDef, names: Names) -> bool:
    """`torch.autograd.grad(outputs, ctx.input_tensors + ctx.input_params, ...)` where forward
    kept `ctx.input_params = list(args[length:])`: the tensors passed beside the inputs (the
    LDM `checkpoint(func, inputs, params, flag)` convention), differentiated whether or not
    they require grad."""
    ctx = _ctx_name(forward)
    beside = set()
    for node in _walk(forward.body):
        if isinstance(node, cst.Assign) and any(_is_tail_slice(n) for n in _walk(node.value)):
            beside.update(t.target.attr.value for t in node.targets if _is_ctx_attribute(t.target, ctx))
    backward_ctx = _ctx_name(backward)
    for node in _walk(backward.body):
        if isinstance(node, cst.Call) and names(node.func) & {"torch.autograd.grad"}:
            inputs = next((a.value for a in node.args if a.keyword is not None and a.keyword.value == "inputs"), None)
            if inputs is None and len(node.args) > 1 and node.args[1].keyword is None:
                inputs = node.args[1].value
            if inputs is not None and any(
                _is_ctx_attribute(n, backward_ctx) and n.attr.value in beside for n in _walk(inputs)
            ):
                return True
    return False


def _is_tail_slice(node: cst.CSTNode) -> bool:
    """`args[length:]`."""
    return isinstance(node, cst.Subscript) and any(
        isinstance(e.slice, cst.Slice) and e.slice.lower is not None and e.slice.upper is None for e in node.slice
    )


def _identifiers(node: cst.CSTNode) -> Iterator[str]:
    for child in _walk(node):
        if isinstance(child, cst.Name):
            yield child.value
