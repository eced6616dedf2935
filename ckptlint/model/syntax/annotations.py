"""The classes a parameter's annotation names (`block: Type[BasicBlock]`,
`norm_layer: Optional[Callable[..., nn.Module]]`), resolved to absolute names: what a
summary's parameter may hold when nothing passes it (`ckptlint.model.file_facts.code`)."""

from __future__ import annotations

import ast
from collections.abc import Callable

# Names an annotation may use around the classes it names.
_TYPING_WRAPPERS = frozenset(
    {"Type", "type", "Optional", "Union", "Tuple", "tuple", "List", "list", "Sequence", "Iterable", "Callable",
     "Dict", "dict", "Any", "ClassVar", "Final", "Annotated"}
)


def annotated_classes(annotation: ast.AST | None, resolve: Callable[[ast.AST], str | None]) -> tuple[str, ...]:
    """The classes an annotation names: `Type[BasicBlock]`, `Union[Type[A], Type[B]]`,
    `Optional[Callable]`, `Tuple[Type[A], ...]`; typing's own names are skipped."""
    found: list[str] = []
    _annotated_names(annotation, resolve, found)
    return tuple(dict.fromkeys(found))


# The recursive walks of the extraction are module-level functions, not closures: a closure
# that calls itself is a reference cycle, which keeps what it reaches (the syntax tree)
# alive until the collector runs.
def _annotated_names(node: ast.AST | None, resolve: Callable[[ast.AST], str | None], found: list[str]) -> None:
    if isinstance(node, ast.Subscript):
        _annotated_names(node.value, resolve, found)
        _annotated_names(node.slice, resolve, found)
    elif isinstance(node, ast.Tuple):
        for element in node.elts:
            _annotated_names(element, resolve, found)
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        _annotated_names(node.left, resolve, found)
        _annotated_names(node.right, resolve, found)
    elif isinstance(node, (ast.Name, ast.Attribute)):
        short = node.id if isinstance(node, ast.Name) else node.attr
        if short not in _TYPING_WRAPPERS and short[:1].isupper():
            name = resolve(node)
            if name is not None:
                found.append(name)
