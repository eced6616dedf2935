from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.branches import BranchPath, branch_paths
from ckptlint.analysis.cst_walk import child_nodes, walk
from ckptlint.analysis.fsdp import WrapStep, call_at, wrap_steps
from ckptlint.model.file_facts.facts import EventKind, Impl
from ckptlint.model.index import ProjectIndex
from ckptlint.rule import Replacement, Rule
from ckptlint.types import Applicability, Severity
from ckptlint.versions import Applies, VersionRange

from .construction_wrappers import ConstructionWrap, wrapped_at_construction

# The release with FSDP1's guard that skips the pre-forward unshard while a unit is being
# recomputed in backward (`BACKWARD_PRE` state check in `_runtime_utils._pre_forward`).
NESTING_FIXED = VersionRange.of("torch", max="2.1")


_CONSEQUENCES = {
    Impl.REENTRANT: "the reentrant implementation all-gathers every unit twice in backward",
    Impl.NON_REENTRANT: f"{NESTING_FIXED} fails on that nesting",
    Impl.UNKNOWN: "torch < 2.1 fails on that nesting, and the reentrant implementation all-gathers every unit "
    "twice in backward",
}


class CheckpointBeforeFsdpWrap(Rule):
    """Activation checkpointing applied to a model before FSDP1 auto-wraps it.

    ## What it does
    Finds `apply_activation_checkpointing(model, ...)`, or `checkpoint_wrapper` applied to
    `model`'s layers, followed by `FullyShardedDataParallel(model, auto_wrap_policy=...)` on
    the same model: in the same function, or through functions of the project that the
    model is passed to (`apply_ac(model)` in one module, `shard(model)` in another; also
    `model = apply_ac(build())`, the model built in the call, when the helper returns it).
    Where the helper takes the wrapper as a parameter (`def apply_ac(model,
    wrapper=reentrant_wrapper)`), or builds it from one (`impl = CheckpointImpl.REENTRANT if
    reentrant else ...`), the implementation is the one each call chooses, or the default it
    leaves in place; the message says which. Also a model class whose constructor wraps its
    layers with `checkpoint_wrapper` (in every instance the project builds), when an FSDP1
    auto-wrap of the project wraps a model holding it: building comes first, so the order is
    the same; reported at the wrapper, without a fix.

    ## Why is this bad?
    The auto-wrap policy then looks inside the checkpoint wrappers and puts the FSDP units
    *inside* them: `CheckpointWrapper(FSDP(Block))` instead of `FSDP(CheckpointWrapper(Block))`.
    Old torch failed outright on that nesting (pytorch/pytorch#82203: "Error when wrapping
    FSDP inside `checkpoint_wrapper`", with both implementations). On torch 2.13 the model is
    still sharded into the same units, but with the reentrant implementation every unit is
    all-gathered twice in backward (8 all-gathers instead of 4 for 4 blocks), because the
    recomputation runs the FSDP unit's forward again outside its backward hooks; several
    reentrant regions in one unit crash backward.

    Reported for reentrant wrappers on every torch version, and for non-reentrant ones only
    when the targeted torch predates 2.1 (or is unknown).

    ## Example
    ```python
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant_wrapper, check_fn=is_block)
    model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}))
    ```

    ## Use instead
    ```python
    model = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({Block}))
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant_wrapper, check_fn=is_block)
    ```

    ## Fix safety
    The fix moves the checkpointing call after the wrap, applied to the wrapped model. It is
    **unsafe** (the code between the two may rely on the checkpointing being applied) and
    offered only when both statements sit in one block, the wrap's result is assigned to a
    name, and nothing in between rebinds a name the moved call reads.

    Not reported for FSDP2's `fully_shard` (checkpointing first is the documented order, as
    torchtitan does), when FSDP wraps the checkpoint wrapper itself
    (`FSDP(checkpoint_wrapper(layer))`), when the wrap has no auto-wrap policy, or when the
    two sit on branches that never both run (`if args.fsdp:` ... `else:`, or `if ac and not
    fsdp:` ... `if fsdp:`).

    ## Evidence
    torch 2.13 on CPU (gloo, 2 ranks, `stem -> 4 x Block -> head`, EVIDENCE Q5): AC then
    `FSDP(ModuleWrapPolicy({Block}))` gives 5 units, half the parameter bytes per rank, and
    the nesting `CheckpointWrapper(FSDP(Block))`; backward all-gathers 8 times with
    `CheckpointImpl.REENTRANT` (4 with `NO_REENTRANT`, or when AC is applied after the
    wrap). The guard that makes the nested non-reentrant case work, FSDP1 skipping its
    pre-forward unshard while a handle is in `BACKWARD_PRE`, is in
    `torch/distributed/fsdp/_runtime_utils.py` from torch 2.1 (pytorch/pytorch#105090
    added the check for the composable path); pytorch/pytorch#82203 (torch 1.12) is the
    original failure.
    """

    code = "CKPT003"
    severity = Severity.ERROR
    name = "checkpoint-before-fsdp-wrap"
    message = "activation checkpointing applied before the FSDP1 auto-wrap"
    fix = Applicability.UNSAFE
    # Checkpointing may be applied by a project function: only the wrap must be visible.
    triggers = (b"FullyShardedDataParallel", b"FSDP", b"fsdp", b"checkpoint_wrapper")
    requires = ()
    uses_project = True
    reached_through_fsdp_wrappers = True  # `model = shard(model)`: FSDP named in another module

    def __init__(self, context) -> None:
        super().__init__(context)
        self._calls: list[cst.Call] = []

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        return bool(_checkpointed_then_wrapped(project, relative_path)) or bool(wrapped_at_construction(project, relative_path))

    def visit_Call(self, node: cst.Call) -> None:
        self._calls.append(node)

    def finish(self) -> None:
        for checkpointing, wrap in _checkpointed_then_wrapped(self.context.project, self.context.relative_path):
            self._check(checkpointing, wrap)
        for built in wrapped_at_construction(self.context.project, self.context.relative_path):
            self._check_construction(built)

    def _check_construction(self, built: ConstructionWrap) -> None:
        """A checkpoint wrapper the model's constructor applies, and an FSDP1 auto-wrap of the
        built model: reported at the wrapper (no fix: the wrapping belongs after the FSDP wrap,
        in the training code)."""
        impl = built.event.impl
        if impl is not Impl.REENTRANT and self.context.versions.applies((NESTING_FIXED,)) is Applies.NO:
            return
        node = call_at(self.context, self._calls, built.event.line, built.event.column)
        if node is None:
            return
        short = built.owner.rsplit(".", 1)[-1]
        held = "" if built.model.cls == built.owner else f", which holds a `{short}`"
        self.report(
            node,
            f"`checkpoint_wrapper` in `{short}.__init__` wraps layers when the model is built, before "
            f"`FullyShardedDataParallel(..., auto_wrap_policy=...)` at {built.use.path}:{built.use.line} wraps the "
            f"`{built.model.short_name}`{held}: the FSDP units end up inside the checkpoint wrappers, "
            f"`CheckpointWrapper(FSDP(Block))`, and {_CONSEQUENCES[impl]}; apply checkpointing to the wrapped model after "
            "the wrap instead of in the constructor",
        )

    def _check(self, checkpointing: WrapStep, wrap: WrapStep) -> None:
        if checkpointing.impl is not Impl.REENTRANT:
            applies = self.context.versions.applies((NESTING_FIXED,))
            if applies is Applies.NO:
                return
        node = call_at(self.context, self._calls, checkpointing.event.line, checkpointing.event.column)
        if node is None or self._exclusive(node, wrap):
            return
        path = self.context.relative_path
        impl = _CONSEQUENCES[checkpointing.impl] + (
            " (target version unknown)"
            if checkpointing.impl is Impl.NON_REENTRANT and self.context.versions.applies((NESTING_FIXED,)) is Applies.UNKNOWN
            else ""
        )
        wrapped_at = wrap.where(path)
        effect = checkpointing.effect
        chosen = f"; {checkpointing.impl.value}: {effect.impl_from}" if effect is not None and effect.impl_from else ""
        message = (
            f"activation checkpointing on `{checkpointing.name}` (at {checkpointing.where(path)}{chosen}) before "
            f"`FullyShardedDataParallel(..., auto_wrap_policy=...)` wraps it (at {wrapped_at}): the FSDP units end "
            f"up inside the checkpoint wrappers, `CheckpointWrapper(FSDP(Block))`, and {impl}; apply "
            "checkpointing to the wrapped model after the wrap"
        )
        self.report(node, message, replacements=self._move(checkpointing, wrap, node), fix_message="Move the checkpointing after the FSDP wrap")

    def _exclusive(self, call: cst.Call, wrap: WrapStep) -> bool:
        """The checkpointing and the wrap on branches that never both run (`if args.fsdp:`
        ... `else:`)."""
        wrap_call = call_at(self.context, self._calls, wrap.event.line, wrap.event.column)
        if wrap_call is None:
            return False
        paths = self._branch_paths
        return call in paths and wrap_call in paths and paths[call].exclusive_with(paths[wrap_call])

    @cached_property
    def _branch_paths(self) -> dict[cst.Call, BranchPath]:
        return branch_paths(self.context)

    def _move(self, checkpointing: WrapStep, wrap: WrapStep, call: cst.Call) -> list[Replacement]:
        if checkpointing.effect is not None or wrap.effect is not None or not checkpointing.event.direct:
            return []
        wrap_call = call_at(self.context, self._calls, wrap.event.line, wrap.event.column)
        if wrap_call is None:
            return []
        found = _statements_in_one_block(self.context.module, call, wrap_call)
        if found is None:
            return []
        block, first, second = found
        statements = list(block.body)
        moved, target = statements[first], statements[second]
        assign = target.body[0]
        if not (isinstance(assign, cst.Assign) and len(assign.targets) == 1):
            return []
        wrapped_name = assign.targets[0].target
        if not isinstance(wrapped_name, (cst.Name, cst.Attribute)) or not call.args:
            return []
        read = {n.value for n in _names(call)}
        rebound = {n.value for statement in statements[first + 1 : second] for n in _assigned_names(statement)}
        if read & rebound:
            return []
        new_call = call.with_changes(args=[call.args[0].with_changes(value=wrapped_name), *call.args[1:]])
        new_statement = moved.deep_replace(call, new_call).with_changes(leading_lines=())
        after_removed = statements[first + 1].with_changes(
            leading_lines=(*moved.leading_lines, *statements[first + 1].leading_lines)
        )
        # The statement after the moved one keeps the comments and blank lines above it.
        between = [after_removed, *statements[first + 2 : second + 1]]
        new_body = [*statements[:first], *between, new_statement, *statements[second + 1 :]]
        return [Replacement(block, block.with_changes(body=new_body))]


def _checkpointed_then_wrapped(project: ProjectIndex, relative_path: str) -> list[tuple[WrapStep, WrapStep]]:
    """(checkpointing, FSDP1 auto-wrap) of the same model, in that order, in the file's functions."""
    found = []
    facts = project.files.get(relative_path)
    for function in facts.functions if facts is not None else ():
        checkpointed: dict[int, WrapStep] = {}
        for step in wrap_steps(function, project):
            if step.kind is EventKind.CHECKPOINT:
                checkpointed.setdefault(step.model, step)
            elif step.kind is EventKind.FSDP1 and step.auto_wrap and step.model in checkpointed:
                first = checkpointed.pop(step.model)
                if first.effect is not None and step.effect is not None and first.event == step.event:
                    continue  # both inside one helper call: the helper's file reports it
                found.append((first, step))
    return found


def _statements_in_one_block(
    module: cst.Module, first_call: cst.Call, second_call: cst.Call
) -> tuple[cst.Module | cst.IndentedBlock, int, int] | None:
    """The block holding `first_call` as an expression statement and `second_call` as the
    value of an assignment, later in the same block (the last such block of the module, in
    the order of the source)."""
    found = None
    for block in _blocks_in_order(module):
        first = second = None
        for index, statement in enumerate(block.body):
            if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
                continue
            small = statement.body[0]
            if isinstance(small, cst.Expr) and small.value is first_call:
                first = index
            elif isinstance(small, cst.Assign) and small.value is second_call:
                second = index
        if first is not None and second is not None and first < second:
            found = (block, first, second)
    return found


def _blocks_in_order(node: cst.CSTNode) -> Iterator[cst.Module | cst.IndentedBlock]:
    """The module and its indented blocks, in the order of the source."""
    stack = [node]
    while stack:
        node = stack.pop()
        if isinstance(node, (cst.Module, cst.IndentedBlock)):
            yield node
        stack.extend(reversed(child_nodes(node)))


def _names(node: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Collector(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.append(name)

    walk(node, Collector())
    return found


def _assigned_names(statement: cst.CSTNode) -> list[cst.Name]:
    found: list[cst.Name] = []

    class Collector(cst.CSTVisitor):
        def visit_AssignTarget(self, target: cst.AssignTarget) -> None:
            found.extend(_names(target))

        def visit_AugAssign(self, node: cst.AugAssign) -> None:
            found.extend(_names(node.target))

    walk(statement, Collector())
    return found
