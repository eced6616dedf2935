"""The file's names as the rules ask about them, by libcst node: what a name, attribute or
call may denote (`qualified`), and what a name is bound by where it is read (`bindings`).

The project model answers, on the file's `ast` tree (`ScopeNames`, which the Hugging Face
interpreter reads too: built once per parse), asked through the bridge that pairs the two
trees' expressions (`ExpressionPairs`). The model is built before the traversal, so the
answers hold inside `visit_*` as after it. Where the model cannot answer - syntax only
libcst parses, a construct whose libcst reading `ScopeNames` does not reproduce
(`ScopeNames.unsupported`), trees that do not pair up - libcst's own scope analysis does,
for the whole file (`tests/test_script_model_scopes.py` holds the two to the same answers).

A name no binding of the file holds, in a file that star-imports project modules
(`from ..modules.attention import *`, the diffusion repositories' layout), is what those
modules bind it to (`ProjectIndex.star_imported`, theirs in turn): an answer neither tree
has, which the project gives.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.ast_bridge import ExpressionPairs
from ckptlint.model.script_models.names import QualifiedName
from ckptlint.model.script_models.scopes import ScopeNames
from ckptlint.model.syntax.names import module_name

if TYPE_CHECKING:
    from libcst.metadata import MetadataWrapper

    from ckptlint.model.index import ProjectIndex

_SOURCES = {"IMPORT": "import", "LOCAL": "local", "BUILTIN": "builtin"}  # libcst's, as the model names them


@dataclass(frozen=True)
class Bound:
    """One binding of a name: `kind` "import", "local" or "builtin"; `target`, for a name
    assigned to, the libcst `Name` assigned (else None: a definition, a parameter...)."""

    kind: str
    target: cst.Name | None


class NamedFile(Protocol):
    """What the names are read from (`ckptlint.rule.FileContext` is one)."""

    ast_module: ast.Module | None
    module: cst.Module
    wrapper: MetadataWrapper
    project: ProjectIndex
    relative_path: str


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

    def __init__(self, context: NamedFile) -> None:
        tree = context.ast_module
        self.model_names: ScopeNames | None = ScopeNames(tree) if tree is not None else None
        # The file's libcst expressions with their `ast` nodes (None: no `ast` tree, or
        # trees that do not pair up), for every question the model answers by `ast` node.
        self.pairs: ExpressionPairs | None = None
        if tree is not None:
            self.pairs = ExpressionPairs(context.module, tree)
            if self.pairs.mismatch is not None:
                self.pairs = None
        # libcst's scopes answer the name questions the model cannot (its `ast` names unpaired).
        answered = self.pairs is not None and self.model_names.unsupported is None
        self._libcst: LibcstScopes | None = None if answered else LibcstScopes(context.wrapper)
        self._answers: dict[cst.CSTNode, frozenset[QualifiedName]] = {}
        # `from ..modules.attention import *` of project modules: what they bind a name the
        # file leaves unbound (the project knows; libcst's scopes do not).
        facts = context.project.files.get(context.relative_path)
        self._star_module = module_name(context.relative_path) if facts is not None and facts.star_imports else None
        self._project = context.project

    @property
    def fallback_reason(self) -> str | None:
        """Why libcst answers for this file (None: the model does)."""
        if self._libcst is None:
            return None
        if self.model_names is None:
            return "only libcst parses the file"
        return self.model_names.unsupported if self.pairs is not None else "the trees' expressions do not pair up"

    def qualified(self, expr: cst.BaseExpression) -> frozenset[QualifiedName]:
        """What a name, attribute or call may denote (empty: not known)."""
        if self._libcst is not None:
            found = self._answers.get(expr)
            if found is None:
                found = self._answers[expr] = self._libcst.qualified(expr)
        else:
            node = self.pairs.ast_node(expr)
            found = self.model_names.qualified(node) if node is not None else frozenset()
        if not found and self._star_module is not None:
            return self._star_imported(expr)
        return found

    def _star_imported(self, expr: cst.BaseExpression) -> frozenset[QualifiedName]:
        """A name (or a dotted name, or its call) no binding of the file's holds, as the
        project modules it star-imports bind it."""
        attributes = []
        leftmost = expr.func if isinstance(expr, cst.Call) else expr
        while isinstance(leftmost, cst.Attribute):
            attributes.append(leftmost.attr.value)
            leftmost = leftmost.value
        if not isinstance(leftmost, cst.Name) or self.bindings(leftmost) != []:
            return frozenset()
        absolute = self._project.star_imported(self._star_module, leftmost.value)
        if absolute is None:
            return frozenset()
        return frozenset({QualifiedName(".".join([absolute, *reversed(attributes)]), "import")})

    def bindings(self, name: cst.Name) -> list[Bound] | None:
        """The bindings `name` may refer to where it is read (libcst's `scope[name]`: all
        of its scope's, or the enclosing one's); None when the name is in no scope."""
        if self._libcst is not None:
            return self._libcst.bindings(name)
        node = self.pairs.ast_node(name)
        scope = self.model_names.scope_of(node) if isinstance(node, ast.Name) else None
        if scope is None:
            return None
        return [
            Bound(binding.kind, self.pairs.cst_name(binding.node) if isinstance(binding.node, ast.Name) else None)
            for binding in scope.resolve(node.id)
        ]
