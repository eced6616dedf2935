"""Where the tensors a checkpoint call is given come from, in the function holding the call,
and whether they provably do not require grad (libcst):

    with torch.no_grad(): h = self.encoder(x)   computed under no_grad
    h = self.encoder(x).detach()                detached
    h = self.embed(input_ids)                   a frozen embedding (indices never require grad)
    h = self.stem(x)                            a frozen module given what does not require grad
    def forward(self, pixel_values): ...        the outermost model's own input
    h = checkpoint(blk, h)                      a reentrant region given what does not require
                                                grad: its output does not either (the cascade)

Anything else (a trainable module's output, arithmetic with a parameter, a name bound in a
way not read here, a function that names `requires_grad` at all) is taken to require grad.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ckptlint.lazy_libcst import cst

from ckptlint.model.library.torch import GRAD_PRESERVING_METHODS

_MAX_DEPTH = 12


@dataclass(frozen=True)
class _Binding:
    value: cst.BaseExpression | None  # None: bound in a form not read here (`a, b = ...`, `+=`)
    line: int
    unconditional: bool  # directly in the function's body (or in a `with` there)
    loops: tuple[cst.CSTNode, ...]  # the loops it sits in, outermost first
    no_grad: bool  # inside `with torch.no_grad():`
    branches: tuple[tuple[cst.If, bool], ...] = ()  # the `if` branches it sits in (True: the body)


@dataclass(frozen=True)
class Producers:
    """What the rule knows about the calls an input may come from."""

    position: Callable[[cst.CSTNode], int]  # a node's first line
    is_no_grad_context: Callable[[cst.BaseExpression], bool]  # `torch.no_grad()` as a `with` item
    # Why `self.<attr>(...)` at a call gives what does not require grad whatever it is given
    # (a frozen embedding), or only when its inputs do not ("frozen"), or None (trainable).
    frozen_call: Callable[[cst.Call], tuple[str, bool] | None]
    # For a checkpoint call of the file: whether it runs reentrant, and its tensor inputs.
    checkpoint_inputs: Callable[[cst.Call], tuple[cst.BaseExpression, ...] | None]
    # Why a parameter of the function is the model's own input (it is the outermost model's
    # `forward`), or None.
    model_input: Callable[[str], str | None]


class InputOrigins:
    """The origins of the names and expressions at one call of one function."""

    def __init__(self, function: cst.FunctionDef, producers: Producers) -> None:
        self.function = function
        self.producers = producers
        self.parameters = {
            p.name.value for p in (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params)
        }
        self.bindings: dict[str, list[_Binding]] = {}
        self.loops_of: dict[cst.CSTNode, tuple[cst.CSTNode, ...]] = {}  # each call: its loops
        self.branches_of: dict[cst.CSTNode, tuple[tuple[cst.If, bool], ...]] = {}  # each call: its branches
        self.names_requires_grad = False
        self._branches: tuple[tuple[cst.If, bool], ...] = ()
        self._walk(function.body, True, (), False)

    # --- what the function binds -------------------------------------------------------------

    def _walk(self, node: cst.CSTNode, unconditional: bool, loops: tuple, no_grad: bool) -> None:
        if isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)) and node is not self.function:
            return
        if isinstance(node, cst.Attribute) and node.attr.value in ("requires_grad", "requires_grad_"):
            self.names_requires_grad = True
        if isinstance(node, cst.Call):
            self.loops_of[node] = loops
            self.branches_of[node] = self._branches
        if isinstance(node, cst.If):
            self._walk(node.test, False, loops, no_grad)
            outer = self._branches
            self._branches = (*outer, (node, True))
            self._walk(node.body, False, loops, no_grad)
            if node.orelse is not None:
                self._branches = (*outer, (node, False))
                self._walk(node.orelse, False, loops, no_grad)
            self._branches = outer
            return
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self._bind(target.target, node.value, node, unconditional, loops, no_grad)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self._bind(node.target, node.value, node, unconditional, loops, no_grad)
        elif isinstance(node, cst.AugAssign):
            self._bind(node.target, None, node, unconditional, loops, no_grad)
        elif isinstance(node, cst.NamedExpr):
            self._bind(node.target, None, node, unconditional, loops, no_grad)
        elif isinstance(node, (cst.For, cst.CompFor)):
            self._bind(node.target, None, node, False, loops, no_grad)
        elif isinstance(node, cst.WithItem) and node.asname is not None:
            self._bind(node.asname.name, None, node, False, loops, no_grad)
        if isinstance(node, (cst.For, cst.While)):
            inner = (*loops, node)
            for child in node.children:
                self._walk(child, False, inner if child is node.body else loops, no_grad)
            return
        if isinstance(node, cst.With):
            quiet = no_grad or any(self.producers.is_no_grad_context(item.item) for item in node.items)
            for child in node.children:
                self._walk(child, unconditional, loops, quiet if child is node.body else no_grad)
            return
        if isinstance(node, (cst.If, cst.Try, cst.TryStar, cst.Match, cst.IfExp, cst.BooleanOperation)):
            unconditional = False
        for child in node.children:
            self._walk(child, unconditional, loops, no_grad)

    def _bind(self, target, value, node, unconditional, loops, no_grad) -> None:
        if isinstance(target, cst.Name):
            binding = _Binding(value, self.producers.position(node), unconditional, loops, no_grad, self._branches)
            self.bindings.setdefault(target.value, []).append(binding)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._bind(element.value, None, node, unconditional, loops, no_grad)
        elif isinstance(target, cst.StarredElement):
            self._bind(target.value, None, node, unconditional, loops, no_grad)

    # --- origins -----------------------------------------------------------------------------

    def of(self, expr: cst.BaseExpression, at: cst.Call) -> str | None:
        """Why `expr`, given to the call `at`, does not require grad; None when it may."""
        if self.names_requires_grad:
            return None  # `x.requires_grad_()`, `if x.requires_grad:`: the code decides itself
        self._at_branches = self.branches_of.get(at, ())
        return self._expression(expr, self.producers.position(at), self.loops_of.get(at, ()), frozenset(), 0)

    def _expression(self, expr, line: int, loops: tuple, visiting: frozenset, depth: int) -> str | None:
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, cst.Name):
            return self._name(expr.value, line, loops, visiting, depth)
        if isinstance(expr, cst.Subscript):
            return self._expression(expr.value, line, loops, visiting, depth + 1)
        if isinstance(expr, cst.BinaryOperation):
            sides = [side for side in (expr.left, expr.right) if not isinstance(side, (cst.Integer, cst.Float))]
            return _combined([self._expression(side, line, loops, visiting, depth + 1) for side in sides])
        if not isinstance(expr, cst.Call):
            return None
        func = expr.func
        if isinstance(func, cst.Attribute) and not expr.args and func.attr.value == "detach":
            return f"`.detach()`ed (line {self.producers.position(expr)})"
        inputs = self.producers.checkpoint_inputs(expr)
        if inputs is not None:  # a reentrant region given inputs that do not require grad
            return _combined([self._expression(arg, line, loops, visiting, depth + 1) for arg in inputs])
        frozen = self.producers.frozen_call(expr)
        if frozen is not None:
            why, whatever_given = frozen
            if whatever_given:
                return why
            if any(arg.star or arg.keyword is not None for arg in expr.args):
                return None
            given = _combined([self._expression(arg.value, line, loops, visiting, depth + 1) for arg in expr.args])
            return None if given is None else f"{why}, given {given}" if given else why
        if isinstance(func, cst.Attribute) and func.attr.value in GRAD_PRESERVING_METHODS:
            return self._expression(func.value, line, loops, visiting, depth + 1)
        return None

    def _name(self, name: str, line: int, loops: tuple, visiting: frozenset, depth: int) -> str | None:
        if name in visiting:
            return ""  # the loop-carried value itself: decided by its other bindings
        bindings = self.bindings.get(name, [])
        if any(b.value is None and not b.no_grad for b in bindings):
            return None
        before = [b for b in bindings if b.line < line]
        killers = [b for b in before if b.unconditional and not set(b.loops) - set(loops)]
        parameter = name in self.parameters
        if killers:
            last = max(b.line for b in killers)
            before = [b for b in before if b.line >= last]
            parameter = False
        carried = [
            b for b in bindings if b.line >= line and set(b.loops) & set(loops) and not self._exclusive(b, loops)
        ]
        reaching = [*before, *carried]
        if not reaching and not parameter:
            return None  # a global, a closure's: not followed
        found: list[str] = []
        if parameter:
            why = self.producers.model_input(name)
            if why is None:
                return None
            found.append(why)
        for binding in reaching:
            if binding.no_grad:
                found.append(f"computed under `torch.no_grad()` (line {binding.line})")
                continue
            why = self._expression(binding.value, binding.line, binding.loops, visiting | {name}, depth + 1)
            if why is None:
                return None
            found.append(why)
        combined = _combined(found)
        return combined if combined or visiting else None


    def _exclusive(self, binding: _Binding, loops: tuple) -> bool:
        """Whether a loop-carried binding sits in the other branch of an `if` around the call
        whose test the loop does not change (`if self.grad_ckpt and self.training:
        checkpoint(...) else: layer(h)`): each run of the loop takes the same branch."""
        at = dict(self._at_branches)
        bound_in_loop = {
            name for name, bindings in self.bindings.items() for b in bindings if set(b.loops) & set(loops)
        }
        for node, branch in binding.branches:
            if node in at and at[node] is not branch:
                tested = {n.value for n in _names(node.test)}
                if not tested & bound_in_loop:
                    return True
        return False


def _names(node: cst.CSTNode):
    if isinstance(node, cst.Name):
        yield node
    for child in node.children:
        yield from _names(child)


def _combined(found: list[str | None]) -> str | None:
    """None when any part may require grad; else the first reason given ("" when every part
    is a loop-carried value decided elsewhere)."""
    if not found or any(why is None for why in found):
        return None
    return next((why for why in found if why), "")
