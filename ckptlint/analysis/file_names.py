"""The file's names as the rules ask about them, by libcst node: what a name, attribute or
call may denote (`qualified`), and what a name is bound by where it is read (`bindings`).

The project model answers, on the file's `ast` tree (`ScopeNames`, which the Hugging Face
interpreter reads too: built once per parse), asked through the bridge that pairs the two
trees' expressions (`ExpressionPairs`). The model is built before the traversal, so the
answers hold inside `visit_*` as after it. Where the model cannot answer - syntax only
libcst parses, a construct whose libcst reading `ScopeNames` does not reproduce
(`ScopeNames.unsupported`), trees that do not pair up - libcst's own scope analysis does,
for the whole file (`tests/test_script_model_scopes.py` holds the two to the same answers).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.ast_bridge import ExpressionPairs
from ckptlint.model.script_models.names import QualifiedName
from ckptlint.model.script_models.scopes import ScopeNames

if TYPE_CHECKING:
    from libcst.metadata import MetadataWrapper

    from ckptlint.rule import FileContext

_SOURCES = {"IMPORT": "import", "LOCAL": "local", "BUILTIN": "builtin"}  # libcst's, as the model names them


@dataclass(frozen=True)
class Bound:
    """One binding of a name: `kind` "import", "local" or "builtin"; `target`, for a name
    assigned to, the libcst `Name` assigned (else None: a definition, a parameter...)."""

    kind: str
    target: cst.Name | None


class LibcstScopes:
    """Name questions answered by libcst's ScopeProvider (a second traversal of the file)."""

    def __init__(self, wrapper: MetadataWrapper) -> None:
        from libcst.metadata import ScopeProvider

        self._scopes = wrapper.resolve(ScopeProvider)

    def qualified(self, expr: cst.BaseExpression) -> frozenset[QualifiedName]:
        scope = self._scopes.get(expr)
        if scope is None or not isinstance(expr, (cst.Name, cst.Attribute, cst.Call)):
            return frozenset()
        return frozenset(
            QualifiedName(found.name, _SOURCES[found.source.name]) for found in scope.get_qualified_names_for(expr)
        )

    def bindings(self, name: cst.Name) -> list[Bound] | None:
        scope = self._scopes.get(name)
        if scope is None:
            return None
        found = []
        for assignment in scope[name.value]:
            node = getattr(assignment, "node", None)
            if node is None:
                found.append(Bound("builtin", None))
            elif isinstance(node, (cst.Import, cst.ImportFrom, cst.ImportAlias)):
                found.append(Bound("import", None))
            else:
                found.append(Bound("local", node if isinstance(node, cst.Name) else None))
        return found


class FileNames:
    """The names of one parse of a file (`FileContext.names`)."""

    def __init__(self, context: FileContext) -> None:
        tree = context.ast_module
        self.model_names: ScopeNames | None = ScopeNames(tree) if tree is not None else None
        self._pairs: ExpressionPairs | None = None
        self._libcst: LibcstScopes | None = None
        self._answers: dict[cst.CSTNode, frozenset[QualifiedName]] = {}
        if self.model_names is not None and self.model_names.unsupported is None:
            self._pairs = ExpressionPairs(context.module, tree)
            if self._pairs.mismatch is not None:
                self._pairs = None
        if self._pairs is None:
            self._libcst = LibcstScopes(context.wrapper)

    @property
    def fallback_reason(self) -> str | None:
        """Why libcst answers for this file (None: the model does)."""
        if self._libcst is None:
            return None
        if self.model_names is None:
            return "only libcst parses the file"
        return self.model_names.unsupported or "the trees' expressions do not pair up"

    def qualified(self, expr: cst.BaseExpression) -> frozenset[QualifiedName]:
        """What a name, attribute or call may denote (empty: not known)."""
        if self._libcst is not None:
            found = self._answers.get(expr)
            if found is None:
                found = self._answers[expr] = self._libcst.qualified(expr)
            return found
        node = self._pairs.ast_node(expr)
        return self.model_names.qualified(node) if node is not None else frozenset()

    def bindings(self, name: cst.Name) -> list[Bound] | None:
        """The bindings `name` may refer to where it is read (libcst's `scope[name]`: all
        of its scope's, or the enclosing one's); None when the name is in no scope."""
        if self._libcst is not None:
            return self._libcst.bindings(name)
        node = self._pairs.ast_node(name)
        scope = self.model_names.scope_of(node) if isinstance(node, ast.Name) else None
        if scope is None:
            return None
        return [
            Bound(binding.kind, self._pairs.cst_name(binding.node) if isinstance(binding.node, ast.Name) else None)
            for binding in scope.resolve(node.id)
        ]
