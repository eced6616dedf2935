"""The extraction's walks over `ast` trees. It walks the same subtrees many times over (a
method for its calls, then for its writes, its reads, its checkpoints): each node's children
are listed once and kept on the node (`child_nodes`, `walk`); `walk_own_code` walks a
function's own code in the order it runs."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

_CHILDREN = "_ckptlint_children"


def child_nodes(node: ast.AST) -> tuple[ast.AST, ...]:
    """`tuple(ast.iter_child_nodes(node))`, computed once per node (the tree is never
    changed once parsed)."""
    try:
        return getattr(node, _CHILDREN)
    except AttributeError:
        children = children_of(node)
        setattr(node, _CHILDREN, children)
        return children


def children_of(node: ast.AST) -> tuple[ast.AST, ...]:
    """What `ast.iter_child_nodes` yields, in its order, without its generators (it lists
    the children of every node of every indexed file)."""
    children = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            children.append(value)
        elif isinstance(value, list):
            children.extend([item for item in value if isinstance(item, ast.AST)])
    return tuple(children)


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk(node)`: the node and every node below it, breadth first."""
    pending = [node]
    for node in pending:  # the list grows as it is read: breadth first, as a queue
        children = node.__dict__.get(_CHILDREN)
        if children is None:
            children = child_nodes(node)
        pending.extend(children)
        yield node


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
            stack.extend(reversed(child_nodes(node)))
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
