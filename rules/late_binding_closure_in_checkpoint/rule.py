from __future__ import annotations

import re
from dataclasses import dataclass

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import CheckpointSite, SiteKind
from ckptlint.analysis.cst_walk import descendants, walk
from ckptlint.analysis.fsdp import absolute_names
from ckptlint.analysis.regions import CheckpointingGate, is_backward_call, mentions_checkpointing
from ckptlint.model.library.transformers import HF_CHECKPOINTING_ATTRIBUTE
from ckptlint.model.syntax.names import module_name
from ckptlint.rule import Replacement, Rule
from ckptlint.types import Applicability, Severity

# A lambda handed to Hugging Face's checkpoint: the one call of it a file must hold for the
# rule to read it without torch's checkpoint named.
_HANDS_HF_A_LAMBDA = re.compile(rf"{HF_CHECKPOINTING_ATTRIBUTE}\(\s*lambda\b")

Callable = "cst.Lambda | cst.FunctionDef"  # in annotations only


@dataclass(frozen=True)
class _Definition:
    """A callable defined where loop variables are live: the names the enclosing loops (of
    the same function) bind, and the line of the loop binding each."""

    node: Callable
    loop_names: dict[str, cst.CSTNode]


class LateBindingClosureInCheckpoint(CheckpointingGate, Rule):
    """A lambda or nested function given to checkpoint reads a loop variable.

    ## What it does
    Finds a `lambda` or a function defined inside a `for` / `while` loop or a comprehension,
    given to `torch.utils.checkpoint.checkpoint` (or in the function list of
    `checkpoint_sequential`, or to one of the project's own checkpoint wrappers: a function,
    in any file of the project, that hands one of its parameters to torch's checkpoint, or
    such a method of the class (or one it inherits) called on `self` (`self._ckpt(fn, x)`); or
    to a function listed in `checkpoint-functions`; or a lambda given to Hugging Face's
    `self._gradient_checkpointing_func`, the `partial(checkpoint, ...)` that
    `gradient_checkpointing_enable()` sets on a model's modules in transformers >= 4.35),
    whose body reads a variable the loop binds without binding it itself (as a parameter, a
    default, or an assignment).

    ## Why is this bad?
    Python closures capture variables, not values. The forward pass calls the closure during
    the loop iteration, but the recomputation runs in backward, after the loop has finished:
    the closure then reads the loop variable's *last* value. Each region is recomputed with
    the wrong layer (or index, or mask), and the gradients are silently wrong: no error, no
    warning, the loss still goes down.

    ## Example
    ```python
    for block in self.blocks:
        x = checkpoint(lambda t: block(t, mask), x, use_reentrant=False)
    ```

    ## Use instead
    ```python
    for block in self.blocks:
        x = checkpoint(lambda t, block=block: block(t, mask), x, use_reentrant=False)
    ```
    or pass the module itself: `checkpoint(block, x, mask, use_reentrant=False)`.

    ## Fix safety
    The fix binds each captured loop variable as a keyword default (`block=block`; after
    `*args` it becomes keyword-only), which freezes the value at definition time. It is
    **safe**: checkpoint passes its inputs positionally, so the new parameters always take
    their defaults, and the forward pass already used those values.

    Not reported: default-argument binding, `functools.partial`, factory functions that bind
    per iteration (`create_custom_forward(block)`, timm's and GPT-NeoX's `run_function(start,
    end, functions)`), callables defined outside loops, loop variables passed as checkpoint
    arguments, a loop whose every iteration runs backward after the call on a region that
    does not chain into the next iteration (greedy layer-wise training: the input is
    `h.detach()`, not a name the loop rebinds), so the recomputation runs before the loop
    moves on.

    ## Evidence
    torch 2.13 (CPU): two `Linear(8, 8)` blocks in a loop, each run as
    `checkpoint(lambda t: tanh(block(t)), x, use_reentrant=False)`: the first block's
    gradients differ from the unchecked run by up to 0.61 (weight) and 0.31 (bias), the
    second block's match, and torch raises nothing (the recomputation ran the second block).
    With `block=block` bound as a default every gradient matches exactly.
    `tests/test_closure_rules.py` re-measures this and checks that the fixed code matches.
    """

    code = "CKPT030"
    severity = Severity.ERROR
    name = "late-binding-closure-in-checkpoint"
    message = "late-binding closure given to checkpoint"
    fix = Applicability.SAFE
    # Gated like the region rules: the project's own checkpoint wrappers count (CheckpointingGate).

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        # Also a lambda handed to Hugging Face's checkpoint (`self._gradient_checkpointing_func`).
        return mentions_checkpointing(project, relative_path, settings, text) or _HANDS_HF_A_LAMBDA.search(text) is not None

    def __init__(self, context) -> None:
        super().__init__(context)
        # Per function being visited: the loop-bound names live at this point, innermost last.
        self._frames: list[list[dict[str, cst.CSTNode]]] = [[]]
        self._definitions: dict[cst.CSTNode, _Definition] = {}
        # Names bound to a callable defined in a loop, per enclosing function.
        self._named: dict[tuple[int, str], list[Callable]] = {}
        self._function_stack: list[cst.CSTNode] = []
        # The function each call sits in, to find a name's definition in the same function.
        self._call_owner: dict[cst.Call, int] = {}
        self._classes: list[str] = []  # the classes being visited, by absolute name
        self._call_class: dict[cst.Call, str] = {}  # the class whose method a call sits in
        self._wrapper_calls: list[cst.Call] = []  # calls inside loops: maybe a project wrapper
        self._checked: set[cst.Call] = set()
        self._reported: set[cst.Call] = set()

    # --- where callables are defined --------------------------------------------------

    def _live_loop_names(self) -> dict[str, cst.CSTNode]:
        names: dict[str, cst.CSTNode] = {}
        for frame in self._frames[-1]:
            names.update(frame)
        return names

    def _owner(self) -> int:
        return id(self._function_stack[-1]) if self._function_stack else 0

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        outer = self._classes[-1] if self._classes else module_name(self.context.relative_path)
        self._classes.append(f"{outer}.{node.name.value}")

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        live = self._live_loop_names()
        if live:
            self._definitions[node] = _Definition(node, live)
            self._named.setdefault((self._owner(), node.name.value), []).append(node)
        self._function_stack.append(node)
        self._frames.append([])

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._function_stack.pop()
        self._frames.pop()

    def visit_Lambda(self, node: cst.Lambda) -> None:
        live = self._live_loop_names()
        if live:
            self._definitions[node] = _Definition(node, live)

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Lambda) and self._live_loop_names():
            for target in node.targets:
                if isinstance(target.target, cst.Name):
                    self._named.setdefault((self._owner(), target.target.value), []).append(node.value)

    def visit_For(self, node: cst.For) -> None:
        self._frames[-1].append({name: node for name in _target_names(node.target)})

    def leave_For(self, original_node: cst.For) -> None:
        self._frames[-1].pop()

    def visit_While(self, node: cst.While) -> None:
        # Names (re)assigned in the body change between iterations.
        self._frames[-1].append({name: node for name in _assigned_in(node.body)})

    def leave_While(self, original_node: cst.While) -> None:
        self._frames[-1].pop()

    def _visit_comprehension(self, node) -> None:
        names: dict[str, cst.CSTNode] = {}
        comp_for = node.for_in
        while comp_for is not None:
            names.update({name: node for name in _target_names(comp_for.target)})
            comp_for = comp_for.inner_for_in
        self._frames[-1].append(names)

    def _leave_comprehension(self, node) -> None:
        self._frames[-1].pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _visit_comprehension
    leave_ListComp = leave_SetComp = leave_GeneratorExp = leave_DictComp = _leave_comprehension

    def visit_Call(self, node: cst.Call) -> None:
        self._call_owner[node] = self._owner()
        if self._live_loop_names() and node.args:
            self._wrapper_calls.append(node)
            if self._classes:
                self._call_class[node] = self._classes[-1]

    def finish(self) -> None:
        """Calls of the project's checkpoint wrappers (a function that hands one of its
        parameters to torch's checkpoint) and of configured `checkpoint-functions`."""
        configured = set(self.context.settings.checkpoint_functions)
        for call in self._wrapper_calls:
            func = call.func
            if isinstance(func, cst.Attribute) and func.attr.value == HF_CHECKPOINTING_ATTRIBUTE and call.args:
                # Hugging Face's checkpoint, set by `gradient_checkpointing_enable()`
                if call.args[0].keyword is None and not call.args[0].star:
                    self._check(call, [call.args[0].value], HF_CHECKPOINTING_ATTRIBUTE)
                continue
            names = self._own_method(call) or absolute_names(self.context, call.func)
            if not names:
                continue
            positions = {
                0 if name in configured else self.context.project.checkpointed_parameter(name) for name in names
            }
            if call in self._checked or len(positions) != 1 or None in positions:
                continue
            position = positions.pop()
            positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
            if position < len(positional):
                label = cst.Module([]).code_for_node(call.func)
                self._check(call, [positional[position].value], label)

    def _own_method(self, call: cst.Call) -> set[str]:
        """`self._ckpt(fn, x)` in a method: the method of the class (or of the base it
        inherits it from), by absolute name."""
        func = call.func
        cls = self._call_class.get(call)
        if cls is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return set()
        found = self.context.project.class_method_in(cls, func.attr.value)
        return {f"{found[0]}.{func.attr.value}"} if found is not None else set()

    # --- the check --------------------------------------------------------------------

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if site.kind is not SiteKind.CALL or site.function is None:
            return
        self._checked.add(site.node)
        self._check(site.node, self._callables(site.function, site.node), site.api.short_name)

    def _check(self, call: cst.Call, callables: list[Callable], api: str) -> None:
        if call in self._reported:
            return
        for callable_node in callables:
            definition = self._definitions.get(callable_node)
            if definition is None:
                continue
            captured = sorted(_free_names(callable_node) & set(definition.loop_names))
            if not captured or all(self._backward_in_iteration(call, definition.loop_names[name]) for name in captured):
                continue
            what = "lambda" if isinstance(callable_node, cst.Lambda) else f"function `{callable_node.name.value}`"
            names = ", ".join(f"`{name}`" for name in captured)
            bound = ", ".join(f"{name}={name}" for name in captured)
            self._reported.add(call)
            self.report(
                call,
                f"{what} given to `{api}` reads loop variable{'s' if len(captured) > 1 else ''} "
                f"{names} when it runs: the recomputation in backward runs after the loop has moved on and "
                f"sees the last value, so gradients silently differ from the forward pass; bind it "
                f"as a default ({bound})",
                replacements=[Replacement(callable_node, _bind_defaults(callable_node, captured))],
                fix_message=f"Bind {names} as default{'s' if len(captured) > 1 else ''}",
            )
            return

    def _backward_in_iteration(self, call: cst.Call, loop: cst.CSTNode) -> bool:
        """Whether each iteration of the loop runs backward after the call, on a graph that
        does not reach into earlier iterations (greedy layer-wise training, a micro-batch
        step): the recomputation then runs before the loop moves on. The call's inputs must
        not be names the loop rebinds (`x = checkpoint(..., x)` chains the iterations'
        regions; `h.detach()` cuts them)."""
        if not isinstance(loop, (cst.For, cst.While)):
            return False
        carried = set(_assigned_in(loop.body))
        if any(isinstance(arg.value, cst.Name) and arg.value.value in carried for arg in call.args[1:]):
            return False
        after = self.context.position(call).end
        return any(
            isinstance(node, cst.Call) and is_backward_call(node)
            and (self.context.position(node).start.line, self.context.position(node).start.column) > (after.line, after.column)
            for node in descendants(loop.body)
        )

    def _callables(self, function: cst.BaseExpression, call: cst.Call) -> list[Callable]:
        if isinstance(function, cst.Lambda):
            return [function]
        if isinstance(function, (cst.List, cst.Tuple)):
            return [e.value for e in function.elements if isinstance(e.value, cst.Lambda)]
        if isinstance(function, (cst.ListComp, cst.GeneratorExp)) and isinstance(function.elt, cst.Lambda):
            return [function.elt]
        if isinstance(function, cst.Name):
            found = self._named.get((self._call_owner.get(call, 0), function.value), [])
            return found if len(found) == 1 else []
        return []


def _target_names(target: cst.BaseExpression) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [name for element in target.elements for name in _target_names(element.value)]
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


def _assigned_in(node: cst.CSTNode) -> list[str]:
    found: list[str] = []

    class Collector(cst.CSTVisitor):
        def visit_AssignTarget(self, target: cst.AssignTarget) -> None:
            found.extend(_target_names(target.target))

        def visit_AugAssign(self, assign: cst.AugAssign) -> None:
            found.extend(_target_names(assign.target))

        def visit_AnnAssign(self, assign: cst.AnnAssign) -> None:
            found.extend(_target_names(assign.target))

        def visit_For(self, loop: cst.For) -> None:
            found.extend(_target_names(loop.target))

        def visit_FunctionDef(self, definition: cst.FunctionDef) -> bool:
            return False

        def visit_Lambda(self, definition: cst.Lambda) -> bool:
            return False

    walk(node, Collector())
    return found


def _parameter_names(params: cst.Parameters) -> set[str]:
    names = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    for star in (params.star_arg, params.star_kwarg):
        if isinstance(star, cst.Param):
            names.add(star.name.value)
    return names


def _free_names(node: Callable) -> set[str]:
    """Names the callable reads but does not bind itself."""
    loads: set[str] = set()

    class Reader(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            loads.add(name.value)

        def visit_Attribute(self, attribute: cst.Attribute) -> bool:
            attribute.value.visit(self)  # `x.attr`: only `x` is a name read
            return False

        def visit_Arg(self, arg: cst.Arg) -> bool:
            arg.value.visit(self)  # `f(key=value)`: `key` is no name read
            return False

    walk(node.body, Reader())
    bound = _parameter_names(node.params)
    if isinstance(node, cst.FunctionDef):
        bound |= set(_assigned_in(node.body))
    return loads - bound


def _bind_defaults(node: Callable, names: list[str]) -> Callable:
    params = node.params
    new = [
        cst.Param(
            cst.Name(name),
            default=cst.Name(name),
            equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
        )
        for name in names
    ]
    if isinstance(params.star_arg, cst.Param) or params.kwonly_params:
        params = params.with_changes(kwonly_params=[*params.kwonly_params, *new])
    else:
        params = params.with_changes(params=[*params.params, *new])
    return node.with_changes(params=_with_commas(params))


def _with_commas(params: cst.Parameters) -> cst.Parameters:
    """Every parameter but the last followed by `, `; libcst's default rendering otherwise."""
    def strip(items):
        return [p.with_changes(comma=cst.MaybeSentinel.DEFAULT) for p in items]

    return params.with_changes(
        params=strip(params.params), kwonly_params=strip(params.kwonly_params), posonly_params=strip(params.posonly_params)
    )
