"""What the interpreter asks of names: the qualified names an expression may denote, and
the absolute names they stand for."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import Protocol

from ckptlint.model.syntax.names import absolute_import, canonical_name, module_name


@dataclass(frozen=True)
class QualifiedName:
    """One thing a name may denote, as libcst's `QualifiedNameProvider` names it: `name` is
    `torch.nn.Linear` (source "import"), `main.<locals>.helper` (source "local", within the
    file) or `builtins.print` (source "builtin")."""

    name: str
    source: str


class ScriptNames(Protocol):
    def qualified(self, expr: ast.expr) -> frozenset[QualifiedName]:
        """What a name or attribute of the file's tree may denote (empty: not known)."""


def absolute_names(qualified: frozenset[QualifiedName], relative_path: str) -> set[str]:
    """The absolute names qualified names stand for: imports as imported, the file's own
    definitions prefixed with its module, relative imports resolved against it."""
    module = module_name(relative_path)
    is_package = relative_path.endswith("__init__.py")
    names = set()
    for found in qualified:
        name = found.name
        if found.source == "local":
            name = f"{module}.{name}"
        elif name.startswith("."):
            name = absolute_import(module, is_package, name)
        names.add(canonical_name(name))
    return names
