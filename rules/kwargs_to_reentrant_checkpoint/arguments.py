"""What a checkpoint call hands the function it checkpoints, against what that function
takes (its `Callee`s: every function it may be) and what the plain call of the other branch
of an `if` passes it: too many inputs, a value in another parameter's slot, a tuple packing
what the plain call passes by keyword, arguments the checkpointed call drops, keywords the
function cannot accept. Each gives the finding's message, or None."""

from __future__ import annotations

from collections.abc import Callable

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import CheckpointSite
from ckptlint.analysis.cst_walk import walk

from .callees import Callee, code_of, is_literal


def too_many_inputs(site: CheckpointSite, callees: list[Callee]) -> str | None:
    """More positional inputs than the function takes (open_clip's `CustomTransformer`
    checkpoints `checkpoint(r, x, None, None, attn_mask)` into
    `CustomResidualAttentionBlock.forward(x, attn_mask=None)`): `TypeError` on the first
    checkpointed step, whatever the implementation. Only when every function it may
    call takes fewer, and none has `*args`."""
    if site.function is None or any(arg.star for arg in site.positional):
        return None
    given = len(site.positional)

    def takes(callee: Callee) -> int | None:
        if any(p.kind == "*" for p in callee.parameters):
            return None
        return sum(p.kind == "positional" for p in callee.parameters)

    if not callees or not all((limit := takes(callee)) is not None and given > limit for callee in callees):
        return None
    callee = callees[0]
    return (
        f"`{code_of(site.node.func)}` hands {given} positional inputs to `{callee.name}`{callee.where}, which takes "
        f"{takes(callee)} (`{callee.signature()}`): `TypeError` on the first checkpointed step, whatever the "
        f"implementation; pass only the inputs `{callee.name}` takes"
    )


def misplaced_input(site: CheckpointSite, callees: list[Callee], plain: cst.Call) -> str | None:
    """The checkpointed call passes a value positionally into another parameter than the
    one the plain call of the other branch names for it. Where the callee may be one of
    several functions (a library block whose `forward` changed between versions, a loop
    over blocks of two classes), only when it does so for every one of them."""
    if not callees:
        return None
    # A value may be passed under several names (`k_x=image_embs, v_x=image_embs`).
    keywords: dict[str, list[str]] = {}
    for arg in plain.args:
        if arg.keyword is not None:
            keywords.setdefault(code_of(arg.value), []).append(arg.keyword.value)
    problems = [_slot_problem(site, keywords, callee) for callee in callees]
    if any(problem is None for problem in problems):
        return None
    return problems[0]


def _slot_problem(site: CheckpointSite, keywords: dict[str, list[str]], callee: Callee) -> str | None:
    """What is wrong with the site's positional inputs for `callee`, if anything."""
    slots = [p.name for p in callee.parameters if p.kind == "positional"]
    for position, arg in enumerate(site.positional):
        if arg.star or position >= len(slots):
            continue
        packed = _packed(arg.value, slots[position], keywords, callee)
        if packed is not None:
            return packed
        names = keywords.get(code_of(arg.value))
        if names is None:
            continue
        slot = slots[position]
        expected = " or ".join(f"{name}" for name in names)
        if slot not in names:
            return (
                f"`{code_of(arg.value)}` is passed positionally into parameter `{slot}` of "
                f"`{callee.name}`{callee.where}, while the non-checkpointed branch passes it as `{expected}=`: "
                f"with checkpointing on, the value lands in the wrong parameter; pass the inputs in "
                f"`{callee.name}`'s parameter order"
            )
    return None


def _packed(value: cst.BaseExpression, slot: str, keywords: dict[str, list[str]], callee: Callee) -> str | None:
    """A tuple literal packing values the plain call passes by keyword
    (`checkpoint(blk, x, (rel_pos_bias,))` against `blk(x, rel_pos_bias=rel_pos_bias)`):
    checkpoint hands the tuple on as one argument, so the parameter receives a tuple."""
    if not isinstance(value, cst.Tuple) or any(isinstance(e, cst.StarredElement) for e in value.elements):
        return None
    packed = [code_of(element.value) for element in value.elements]
    named = [(code, keywords[code]) for code in packed if code in keywords]
    if not named:
        return None
    code, names = named[0]
    expected = " or ".join(names)
    return (
        f"`{code_of(value)}` is passed positionally into parameter `{slot}` of `{callee.name}`{callee.where}: one "
        f"tuple, while the non-checkpointed branch passes `{code}` itself as `{expected}=`: checkpoint hands the "
        f"tuple on as it is, so with checkpointing on `{slot}` receives a tuple instead of the value; pass "
        f"{', '.join(f'`{p}`' for p in packed)} without the tuple, in `{callee.name}`'s parameter order"
    )


def dropped_arguments(
    site: CheckpointSite, plain: cst.Call, function: cst.FunctionDef | None, line_of: Callable[[cst.CSTNode], int]
) -> str | None:
    """The plain call of the other branch passes what the checkpointed call drops: a
    `**kwargs` the function holding the call builds up (`kwargs.update(...)`,
    `kwargs["k"] = v`), or a mask. The region then computes something else than the plain
    forward, silently."""
    passed = {code_of(arg.value) for arg in site.node.args}
    splats = [arg for arg in site.node.args if arg.star == "**"]
    dropped = []
    for arg in plain.args:
        if arg.star == "**" and code_of(arg.value) not in passed and _built_up(arg.value, function):
            dropped.append(f"`**{code_of(arg.value)}`")
        elif (
            arg.keyword is not None
            and arg.keyword.value.endswith("mask")
            and not splats
            and not is_literal(arg.value)
            and code_of(arg.value) not in passed
        ):
            dropped.append(f"`{arg.keyword.value}={code_of(arg.value)}`")
    if not dropped:
        return None
    return (
        f"the checkpointed call drops {', '.join(dropped)}, which the non-checkpointed branch passes to "
        f"`{code_of(site.function)}` (line {line_of(plain)}): with checkpointing on, the "
        "region computes something else, silently; pass the same arguments (with `use_reentrant=False` "
        "for keywords)"
    )


def _built_up(expr: cst.BaseExpression, function: cst.FunctionDef | None) -> bool:
    """`kwargs` is a name `function` fills: `kwargs.update(...)`, `kwargs[key] = value`, or
    a dict literal with entries."""
    if function is None or not isinstance(expr, cst.Name):
        return False
    name = expr.value
    found = False

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            nonlocal found
            func = node.func
            if isinstance(func, cst.Attribute) and func.attr.value in ("update", "setdefault") and code_of(func.value) == name:
                found = True

        def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
            nonlocal found
            if isinstance(node.target, cst.Subscript) and code_of(node.target.value) == name:
                found = True

    walk(function, Finder())
    return found


def rejected_keywords(callee: Callee, rejected: list[str]) -> str:
    """Keywords passed through `checkpoint` to a function that cannot accept them."""
    names = ", ".join(f"`{name}`" for name in rejected)
    return (
        f"keyword argument{'s' if len(rejected) > 1 else ''} {names} passed through `checkpoint` to "
        f"`{callee.name}({callee.signature()})`{callee.where}, which cannot accept "
        f"{'them' if len(rejected) > 1 else 'it'}: a TypeError as soon as checkpointing is on (a ValueError "
        "with the reentrant implementation); pass them positionally or give the function the parameters"
    )
