"""libcst traversals without rebuilding the tree.

`node.visit(visitor)` rebuilds every node it passes (each node's
`_visit_and_replace_children` constructs a new node, validated, even for a visitor that
changes nothing), and dispatches by formatting a method name per node and per field. The
walks here call the same visitor methods in the same order, reading each node's children
from its fields instead: a third of the cost. `tests/test_cst_walk.py` checks that every
walk here makes exactly libcst's calls.

    walk(node, visitor)             # node.visit(visitor), for a CSTVisitor
    walk_batched(wrapper, visitors) # wrapper.visit_batched(visitors)
    child_nodes(node)               # node.children
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from contextlib import ExitStack

import libcst as cst
from libcst.metadata import MetadataWrapper

_Hook = Callable[..., object]

# libcst visits these fields (and says so to attribute hooks) only when they are set.
_VISITED_ONLY_WHEN_SET = frozenset({("FormattedStringExpression", "format_spec")})


@functools.cache
def _child_fields(node_class: type[cst.CSTNode]) -> tuple[tuple[str, bool], ...]:
    """The fields libcst visits, in its order, each with whether it is visited only when
    set. Each `_visit_and_replace_children` names its fields as string constants in the
    order it visits them (`visit_required(self, "func", ...)`): read from its code."""
    fields = {field.name for field in dataclasses.fields(node_class)}
    constants = node_class._visit_and_replace_children.__code__.co_consts
    names = dict.fromkeys(c for c in constants if isinstance(c, str) and c in fields)
    return tuple((name, (node_class.__name__, name) in _VISITED_ONLY_WHEN_SET) for name in names)


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's children in libcst's order, as `node.children` (which rebuilds the node)."""
    children: list[cst.CSTNode] = []
    for name, _ in _child_fields(type(node)):
        value = getattr(node, name)
        if isinstance(value, cst.CSTNode):
            children.append(value)
        elif isinstance(value, (tuple, list)):
            children.extend(value)
    return children


# A plan per node class: its enter hooks, its fields (with their attribute hooks), its leave hooks.
_Plan = tuple[tuple[_Hook, ...], tuple[tuple[str, bool, tuple[_Hook, ...], tuple[_Hook, ...]], ...], tuple[_Hook, ...]]


def _plan(node_class: type, hooks: Callable[[str], tuple[_Hook, ...]]) -> _Plan:
    name = node_class.__name__
    fields = tuple(
        (field, only_when_set, hooks(f"visit_{name}_{field}"), hooks(f"leave_{name}_{field}"))
        for field, only_when_set in _child_fields(node_class)
    )
    return hooks(f"visit_{name}"), fields, hooks(f"leave_{name}")


def walk_batched(wrapper: MetadataWrapper, visitors: Sequence[cst.BatchableCSTVisitor]) -> None:
    """`wrapper.visit_batched(visitors)`: every visitor's methods for a node, in the
    visitors' order; children are always visited (a batched visit cannot skip them)."""
    methods: dict[str, list[_Hook]] = {}
    for visitor in visitors:
        for name, method in visitor.get_visitors().items():
            methods.setdefault(name, []).append(method)
    plans: dict[type, _Plan] = {}

    def hooks(name: str) -> tuple[_Hook, ...]:
        return tuple(methods.get(name, ()))

    def visit(node: cst.CSTNode) -> None:
        plan = plans.get(type(node))
        if plan is None:
            plan = plans[type(node)] = _plan(type(node), hooks)
        enter, fields, leave = plan
        for hook in enter:
            hook(node)
        for field, only_when_set, enter_field, leave_field in fields:
            value = getattr(node, field)
            if only_when_set and value is None:
                continue
            for hook in enter_field:
                hook(node)
            if isinstance(value, cst.CSTNode):
                visit(value)
            elif isinstance(value, (tuple, list)):
                for child in value:
                    visit(child)
            for hook in leave_field:
                hook(node)
        for hook in leave:
            hook(node)

    with ExitStack() as stack:
        for visitor in visitors:
            stack.enter_context(visitor.resolve(wrapper))
        visit(wrapper.module)


_DISPATCH = ("on_visit", "on_leave", "on_visit_attribute", "on_leave_attribute")


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`node.visit(visitor)` for a visitor that changes nothing: `visit_<Node>` returning
    False skips the node's children, `leave_<Node>` is called either way. A visitor that
    overrides libcst's dispatch (`on_visit`...) is handed to libcst."""
    if any(getattr(type(visitor), name) is not getattr(cst.CSTVisitor, name) for name in _DISPATCH):
        node.visit(visitor)
        return
    plans: dict[type, _Plan] = {}

    def hooks(name: str) -> tuple[_Hook, ...]:
        method = getattr(visitor, name, None)
        return () if method is None or getattr(method, "_is_no_op", False) else (method,)

    def visit(node: cst.CSTNode) -> None:
        plan = plans.get(type(node))
        if plan is None:
            plan = plans[type(node)] = _plan(type(node), hooks)
        enter, fields, leave = plan
        if not enter or enter[0](node) is not False:
            for field, only_when_set, enter_field, leave_field in fields:
                value = getattr(node, field)
                if only_when_set and value is None:
                    continue
                if enter_field:
                    enter_field[0](node)
                if isinstance(value, cst.CSTNode):
                    visit(value)
                elif isinstance(value, (tuple, list)):
                    for child in value:
                        visit(child)
                if leave_field:
                    leave_field[0](node)
        if leave:
            leave[0](node)

    visit(node)
