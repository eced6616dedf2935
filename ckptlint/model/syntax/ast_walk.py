"""The extraction's walks over `ast` trees. It walks the same subtrees many times over (a
method for its calls, then for its writes, its reads, its checkpoints): each node's children
are listed once and kept on the node (`child_nodes`, `walk`); `walk_own_code` walks a
function's own code in the order it runs, `statements` its statements alone."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence
from itertools import chain

# Where a node keeps its children: hot loops read `node.__dict__.get(CHILDREN)` before
# calling `child_nodes` (a call per node is a tenth of the extraction).
CHILDREN = "_ckptlint_children"


def child_nodes(node: ast.AST) -> tuple[ast.AST, ...]:
    """`tuple(ast.iter_child_nodes(node))`, computed once per node (the tree is never
    changed once parsed)."""
    children = node.__dict__.get(CHILDREN)
    if children is None:  # asked without an exception: most nodes are asked once
        children = node.__dict__[CHILDREN] = children_of(node)
    return children


def children_of(node: ast.AST) -> tuple[ast.AST, ...]:
    """What `ast.iter_child_nodes` yields, in its order, without its generators (it lists
    the children of every node of every indexed file)."""
    fields = _NODE_FIELDS.get(type(node))
    if fields is None:
        fields = _NODE_FIELDS[type(node)] = _node_fields(type(node))
    children = []
    values = node.__dict__
    for name in fields:
        value = values.get(name)
        if isinstance(value, ast.AST):
            children.append(value)
        elif isinstance(value, list):
            children.extend([item for item in value if isinstance(item, ast.AST)])
    return tuple(children)


def _node_fields(kind: type) -> tuple[str, ...]:
    """The fields of a node class that can hold nodes: not the names, numbers and flags
    (`Name.id`, `ImportFrom.level`), nor a constant's value."""
    return tuple(
        name for name in kind._fields
        if not (name in _PRIMITIVE_FIELDS and kind is not _TYPE_ALIAS) and not (kind is ast.Constant and name == "value")
    )


_NODE_FIELDS: dict[type, tuple[str, ...]] = {}
_TYPE_ALIAS = getattr(ast, "TypeAlias", None)  # Python 3.12: its `name` is a `Name` node
_PRIMITIVE_FIELDS = frozenset({
    "id", "attr", "name", "asname", "arg", "module", "level", "simple", "is_async", "conversion", "type_comment",
    "kind", "rest", "kwd_attrs",
})


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk(node)`: the node and every node below it, breadth first. A walk that ran to
    its end is kept on the node (the nodes below it, never the node itself: no cycle keeps
    the tree from being freed): a method is walked for its calls, then its writes, its
    reads..."""
    below = node.__dict__.get(_BELOW)
    return chain((node,), below) if below is not None else _walking(node)


def _walking(node: ast.AST) -> Iterator[ast.AST]:
    yield node
    below = list(child_nodes(node))
    for inner in below:  # the list grows as it is read: breadth first, as a queue
        children = inner.__dict__.get(CHILDREN)
        if children is None:
            children = child_nodes(inner)
        below.extend(children)
        yield inner
    setattr(node, _BELOW, below)


_BELOW = "_ckptlint_walk"


def statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of a body and of its nested blocks, not of nested definitions (and
    never an expression: definitions and assignments are statements); a statement's blocks
    after it, `body`, `orelse`, `finalbody`, then the handlers' and the cases'."""
    pending = list(reversed(body))
    while pending:
        statement = pending.pop()
        yield statement
        if type(statement) not in _WITH_BLOCKS:  # a simple statement, or a definition
            continue
        blocks = [getattr(statement, name, None) for name in ("body", "orelse", "finalbody")]
        blocks += [handler.body for handler in getattr(statement, "handlers", ())]
        blocks += [case.body for case in getattr(statement, "cases", ())]
        for block in reversed(blocks):
            if block:
                pending.extend(reversed(block))


_WITH_BLOCKS = frozenset(
    kind for kind in (
        ast.If, ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith, ast.Try, getattr(ast, "TryStar", None), ast.Match,
    ) if kind is not None
)


def own_nodes(body: Sequence[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of a body, not of the functions, classes and lambdas it defines (those
    themselves are), last statement first."""
    pending = list(body)
    while pending:
        node = pending.pop()
        yield node
        if type(node) not in _OWN_SCOPES:
            children = node.__dict__.get(CHILDREN)
            pending.extend(children if children is not None else child_nodes(node))


def walk_own_code(body: Sequence[ast.stmt]) -> Iterator[ast.AST]:
    """Every node of a function body in source order, descending into nested blocks but not
    into nested function or class bodies (those are visited as themselves)."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        yield node
        kind = type(node)
        if kind in _OWN_SCOPES:
            continue
        if kind not in _ORDERED_KINDS:
            children = node.__dict__.get(CHILDREN)
            stack.extend(reversed(children if children is not None else child_nodes(node)))
            continue
        if isinstance(node, (ast.For, ast.AsyncFor)):
            # The loop header binds before the body runs.
            children = [node.iter, node.target, *node.body, *node.orelse]
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            children = [*node.generators, node.elt]
        elif isinstance(node, ast.DictComp):
            children = [*node.generators, node.key, node.value]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            # The value is evaluated (its calls run) before the name is bound.
            value = [node.value] if node.value is not None else []
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            children = [*value, *targets]
        stack.extend(reversed(children))


# What `walk_own_code` does not enter, and what it walks in evaluation order.
_OWN_SCOPES = frozenset({ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda})
_ORDERED_KINDS = frozenset({
    ast.For, ast.AsyncFor, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp, ast.Assign, ast.AnnAssign,
})
