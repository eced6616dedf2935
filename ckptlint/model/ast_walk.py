"""`ast.walk` and `ast.iter_child_nodes` for the extraction, which walks the same subtrees
many times over (a method for its calls, then for its writes, its reads, its checkpoints):
each node's children are listed once and kept on the node."""

from __future__ import annotations

import ast
from collections.abc import Iterator

_CHILDREN = "_ckptlint_children"


def child_nodes(node: ast.AST) -> tuple[ast.AST, ...]:
    """`tuple(ast.iter_child_nodes(node))`, computed once per node (the tree is never
    changed once parsed)."""
    try:
        return getattr(node, _CHILDREN)
    except AttributeError:
        children = tuple(ast.iter_child_nodes(node))
        setattr(node, _CHILDREN, children)
        return children


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """`ast.walk(node)`: the node and every node below it, breadth first."""
    pending = [node]
    for node in pending:  # the list grows as it is read: breadth first, as a queue
        children = node.__dict__.get(_CHILDREN)
        if children is None:
            children = child_nodes(node)
        pending.extend(children)
        yield node
