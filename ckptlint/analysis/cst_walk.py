"""libcst traversals without rebuilding the tree.

`node.visit(visitor)` rebuilds every node it passes (each node's
`_visit_and_replace_children` constructs a new node, validated, even for a visitor that
changes nothing), and dispatches by formatting a method name per node and per field. The
walks here call the same visitor methods in the same order, reading each node's children
from its fields instead. `tests/test_cst_walk.py` checks that every walk here makes
exactly libcst's calls.

    walk(node, visitor)             # node.visit(visitor), for a CSTVisitor
    walk_batched(wrapper, visitors) # wrapper.visit_batched(visitors)
    child_nodes(node)               # node.children
"""

from __future__ import annotations

import dataclasses
import functools
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Protocol

from ckptlint.lazy_libcst import cst

if TYPE_CHECKING:
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


# What a field's value holds, by the value's class: a node, a sequence of nodes, or neither
# (None, MaybeSentinel). `isinstance(value, cst.CSTNode)` is an ABC check, once per class here.
_NOTHING, _NODE, _NODES = 1, 2, 3  # all true: `get(...) or _value_kind(...)`
_VALUE_KINDS: dict[type, int] = {tuple: _NODES, type(None): _NOTHING}


def _value_kind(value: object) -> int:
    kind = _VALUE_KINDS.get(value.__class__)
    if kind is None:
        kind = _VALUE_KINDS[value.__class__] = (
            _NODE if isinstance(value, cst.CSTNode) else _NODES if isinstance(value, (tuple, list)) else _NOTHING
        )
    return kind


def child_nodes(node: cst.CSTNode) -> list[cst.CSTNode]:
    """The node's children in libcst's order, as `node.children` (which rebuilds the node)."""
    children: list[cst.CSTNode] = []
    for name, _ in _child_fields(type(node)):
        value = getattr(node, name)
        kind = _VALUE_KINDS.get(value.__class__) or _value_kind(value)
        if kind == _NODE:
            children.append(value)
        elif kind == _NODES:
            children.extend(value)
    return children


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What to call for nodes of one class: its enter and leave hooks, and its fields, with
    their attribute hooks when any field has one (`hooked_fields`), else their names alone."""

    enter: tuple[_Hook, ...]
    leave: tuple[_Hook, ...]
    field_names: tuple[str, ...]
    hooked_fields: tuple[tuple[str, bool, tuple[_Hook, ...], tuple[_Hook, ...]], ...] | None


def _plan(node_class: type, hooks: Callable[[str], tuple[_Hook, ...]]) -> _Plan:
    name = node_class.__name__
    fields = tuple(
        (field, only_when_set, hooks(f"visit_{name}_{field}"), hooks(f"leave_{name}_{field}"))
        for field, only_when_set in _child_fields(node_class)
    )
    hooked = any(enter or leave for _, _, enter, leave in fields)
    return _Plan(hooks(f"visit_{name}"), hooks(f"leave_{name}"), tuple(f[0] for f in fields), fields if hooked else None)


def _visit_fields(node: cst.CSTNode, plan: _Plan, visit: Callable[[cst.CSTNode], None], call: Callable) -> None:
    """Visit the node's children field by field, with the fields' attribute hooks."""
    if plan.hooked_fields is None:
        for field in plan.field_names:
            _visit_value(getattr(node, field), visit)
        return
    for field, only_when_set, enter_field, leave_field in plan.hooked_fields:
        value = getattr(node, field)
        if only_when_set and value is None:
            continue
        for hook in enter_field:
            call(hook, node)
        _visit_value(value, visit)
        for hook in leave_field:
            call(hook, node)


def _visit_value(value, visit: Callable[[cst.CSTNode], None]) -> None:
    """A field's value: one node, a sequence of nodes, or neither."""
    kind = _VALUE_KINDS.get(value.__class__) or _value_kind(value)
    if kind == _NODE:
        visit(value)
    elif kind == _NODES:
        for child in value:
            visit(child)


class BatchedVisitor(Protocol):
    """What `walk_batched` walks with: a libcst `BatchableCSTVisitor`, or a rule."""

    def get_visitors(self) -> Mapping[str, Callable[[cst.CSTNode], None]]: ...


def walk_batched(wrapper: MetadataWrapper, visitors: Sequence[BatchedVisitor]) -> None:
    """`wrapper.visit_batched(visitors)`: every visitor's methods for a node, in the
    visitors' order; children are always visited (a batched visit cannot skip them)."""
    methods: dict[str, list[_Hook]] = {}
    for visitor in visitors:
        for name, method in visitor.get_visitors().items():
            methods.setdefault(name, []).append(method)
    plans: dict[type, _Plan] = {}

    def hooks(name: str) -> tuple[_Hook, ...]:
        return tuple(methods.get(name, ()))

    def call(hook: _Hook, node: cst.CSTNode) -> None:
        hook(node)

    def visit(node: cst.CSTNode) -> None:
        plan = plans.get(node.__class__)
        if plan is None:
            plan = plans[node.__class__] = _plan(node.__class__, hooks)
        for hook in plan.enter:
            hook(node)
        _visit_fields(node, plan, visit, call)
        for hook in plan.leave:
            hook(node)

    try:
        with ExitStack() as stack:
            for visitor in visitors:
                if isinstance(visitor, cst.MetadataDependent):  # a rule is not one
                    stack.enter_context(visitor.resolve(wrapper))
            visit(wrapper.module)
    finally:
        # `visit` calls itself: a reference cycle through its cell, holding the visitors
        # (the rules, their file's tree and metadata) until the collector finds it.
        del visit


_DISPATCH = ("on_visit", "on_leave", "on_visit_attribute", "on_leave_attribute")
# Plans by visitor class (hooks as the class's functions), kept while the class lives: a
# visitor walked over many small trees (an `if` test) is planned once.
_CLASS_PLANS: weakref.WeakKeyDictionary[type, dict[type, _Plan]] = weakref.WeakKeyDictionary()


def descendants(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`root` and every node below it (parents before their children)."""
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child_nodes(node))


def statements(root: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`root` and the statements below it, with the blocks that hold them (parents before
    their children), without entering an expression: a file's `if` statements at a tenth
    of the cost of `descendants`."""
    holders = _statement_holders()
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(child for child in child_nodes(node) if isinstance(child, holders))


@functools.cache
def _statement_holders() -> tuple[type, ...]:
    # Asked at the first walk: naming libcst's classes here would import it with this module.
    return (cst.BaseStatement, cst.BaseSuite, cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase)


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """`node.visit(visitor)` for a visitor that changes nothing: `visit_<Node>` returning
    False skips the node's children, `leave_<Node>` is called either way. A visitor that
    overrides libcst's dispatch (`on_visit`...), or sets visitor methods on itself, is
    handed to libcst."""
    visitor_class = type(visitor)
    if any(getattr(visitor_class, name) is not getattr(cst.CSTVisitor, name) for name in _DISPATCH) or any(
        name.startswith(("visit_", "leave_")) for name in getattr(visitor, "__dict__", ())
    ):
        node.visit(visitor)
        return
    plans = _CLASS_PLANS.get(visitor_class)
    if plans is None:
        plans = _CLASS_PLANS[visitor_class] = {}

    def hooks(name: str) -> tuple[_Hook, ...]:
        method = getattr(visitor_class, name, None)
        return () if method is None or getattr(method, "_is_no_op", False) else (method,)

    def call(hook: _Hook, node: cst.CSTNode) -> object:
        return hook(visitor, node)

    def visit(node: cst.CSTNode) -> None:
        plan = plans.get(node.__class__)
        if plan is None:
            plan = plans[node.__class__] = _plan(node.__class__, hooks)
        if not plan.enter or plan.enter[0](visitor, node) is not False:
            _visit_fields(node, plan, visit, call)
        if plan.leave:
            plan.leave[0](visitor, node)

    try:
        visit(node)
    finally:
        del visit  # a closure calling itself is a reference cycle (as in `walk_batched`)
