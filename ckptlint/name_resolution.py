"""Name resolution computed in the shared traversal: scopes, bindings and the qualified
names of expressions, giving exactly what libcst's `ScopeProvider` gives for the questions
the engine asks (`qualified_names`, the bindings behind `assigned_values`) at a fraction of
its cost: no second traversal, no expression-context pass, and accesses resolved only when
asked about.

The model follows `libcst/metadata/scope_provider.py` rule for rule, including its
ordering quirks (an access sees a binding of its own scope only when an assignment-like
statement finished between them; comprehension targets are counted before the element
that precedes them in the source). Constructs whose libcst treatment depends on visiting
order in ways this single source-order pass does not reproduce (assignment expressions in
a comprehension's element or a function's header, PEP 695 type parameters, `TypeVar` and
`NewType` calls whose first argument is not a string, `nonlocal` at module level) make
`unsupported` say why: the caller then falls back to libcst's provider for that file.
tests/test_name_resolution.py holds both to the same answers."""

from __future__ import annotations

from collections.abc import Iterator

from ckptlint.lazy_libcst import cst
from ckptlint.model.syntax.name_scopes import Access, Binding, Scope, imported_names, referents
from libcst.helpers import get_full_name_for_node
from libcst.metadata import QualifiedName, QualifiedNameSource

_TYPING_CALLS = frozenset({"TypeVar", "NewType"})  # libcst skips their first argument


class ScopeBuilder(cst.BatchableCSTVisitor):
    """Builds the scopes during the batched traversal, in source order."""

    def __init__(self) -> None:
        super().__init__()
        self.builtins = Scope("builtin", None)
        self.module_scope = Scope("global", self.builtins)
        self.module_scope.parent = self.builtins
        self.unsupported: str | None = None
        self.scope_of: dict[cst.CSTNode, Scope] = {}
        self.accesses: dict[cst.Name, Access] = {}
        self._stack: list[Scope] = [self.module_scope]
        self._attribute_frames: list[cst.Attribute | None] = [None]
        self._stored: set[cst.Name] = set()
        self._unvisited: set[cst.Name] = set()  # names libcst's scope visitor never visits
        self._opaque = 0  # inside an import, global or nonlocal statement
        self._function_scopes: dict[cst.CSTNode, Scope] = {}
        self._first_for: dict[cst.CompFor, Scope] = {}
        self._function_headers = 0
        self._typing_aliases: set[str] = set(_TYPING_CALLS)

    @property
    def _scope(self) -> Scope:
        return self._stack[-1]

    def _give_up(self, reason: str) -> None:
        if self.unsupported is None:
            self.unsupported = reason

    def _count(self, node: cst.CSTNode) -> None:
        if not self._opaque:
            self._scope.count += 1

    # --- names -------------------------------------------------------------------------

    def visit_Name(self, node: cst.Name) -> None:
        if self._opaque or node in self._unvisited:
            return
        scope = self._scope
        self.scope_of[node] = scope
        if node in self._stored:
            scope.bind(node.value, node)
        else:
            index = None if scope.in_element else scope.count
            self.accesses[node] = Access(node, scope, index, self._attribute_frames[-1])

    def _store(self, target: cst.BaseExpression) -> None:
        if isinstance(target, cst.Name):
            self._stored.add(target)
        elif isinstance(target, (cst.Tuple, cst.List)):
            for element in target.elements:
                self._store(element.value)
        elif isinstance(target, cst.StarredElement):
            self._store(target.value)

    def visit_Assign(self, node: cst.Assign) -> None:
        for target in node.targets:
            self._store(target.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._store(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._store(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        if not self._opaque:
            self._store(node.name)

    def visit_For(self, node: cst.For) -> None:
        self._store(node.target)

    def leave_For_target(self, node: cst.For) -> None:
        self._scope.count += 1

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._unvisited.add(node.attr)
        if self._opaque:
            return
        self.scope_of[node] = self._scope
        if self._attribute_frames[-1] is None:
            self._attribute_frames[-1] = node

    def leave_Attribute(self, original_node: cst.Attribute) -> None:
        if self._attribute_frames[-1] is original_node:
            self._attribute_frames[-1] = None

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._unvisited.add(node.keyword)

    def visit_Call(self, node: cst.Call) -> None:
        self.scope_of[node] = self._scope
        self._attribute_frames.append(None)
        full_name = get_full_name_for_node(node.func)
        if (
            full_name is not None
            and full_name.rpartition(".")[2] in self._typing_aliases
            and node.args
            and not isinstance(node.args[0].value, (cst.SimpleString, cst.ConcatenatedString))
        ):
            self._give_up("TypeVar/NewType call with a first argument that is not a string")

    def leave_Call(self, original_node: cst.Call) -> None:
        self._attribute_frames.pop()

    # --- statements that bind without a Name in store context ------------------------------

    def _visit_import(self, node: cst.Import | cst.ImportFrom) -> None:
        self._opaque += 1
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if alias.asname is not None:
                as_name = alias.asname.name
                names = [n for n, _ in _dotted_names(as_name)] if isinstance(as_name, cst.Name) else []
            else:
                as_name = alias.name
                names = [n for n, _ in _dotted_names(alias.name)]
            for name in names:
                self._scope.bind(name, node, "import", as_name)
            real_name = get_full_name_for_node(alias.name) or ""
            if real_name.rpartition(".")[2] in _TYPING_CALLS and alias.evaluated_alias:
                self._typing_aliases.add(alias.evaluated_alias)

    def visit_Import(self, node: cst.Import) -> None:
        self._visit_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._visit_import(node)

    def leave_Import(self, original_node: cst.Import) -> None:
        self._opaque -= 1
        self._count(original_node)

    def leave_ImportFrom(self, original_node: cst.ImportFrom) -> None:
        self._opaque -= 1
        self._count(original_node)

    def visit_Global(self, node: cst.Global) -> None:
        if self._scope.kind != "global":
            for item in node.names:
                self._scope.overwrites[item.name.value] = self.module_scope
        self._opaque += 1

    def leave_Global(self, original_node: cst.Global) -> None:
        self._opaque -= 1
        self._count(original_node)

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        if self._scope.kind == "global":
            self._give_up("nonlocal at module level")
        for item in node.names:
            self._scope.overwrites[item.name.value] = self._scope.parent
        self._opaque += 1

    def leave_Nonlocal(self, original_node: cst.Nonlocal) -> None:
        self._opaque -= 1
        self._count(original_node)

    # --- scopes ------------------------------------------------------------------------

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if node.type_parameters is not None:
            self._give_up("type parameters")
        self._unvisited.add(node.name)
        self.scope_of[node.name] = self._scope
        self._scope.bind(node.name.value, node)
        self._function_scopes[node] = Scope("function", self._scope, node.name.value)
        self._function_headers += 1  # decorators, parameters and return annotation

    def visit_FunctionDef_params(self, node: cst.FunctionDef) -> None:
        self._stack.append(self._function_scopes[node])

    def leave_FunctionDef_params(self, node: cst.FunctionDef) -> None:
        self._stack.pop()

    def visit_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self._function_headers -= 1
        self._stack.append(self._function_scopes[node])

    def leave_FunctionDef_body(self, node: cst.FunctionDef) -> None:
        self._stack.pop()

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        del self._function_scopes[original_node]
        self._count(original_node)

    def visit_Lambda(self, node: cst.Lambda) -> None:
        self._stack.append(Scope("function", self._scope))

    def leave_Lambda(self, original_node: cst.Lambda) -> None:
        self._stack.pop()

    def visit_Param(self, node: cst.Param) -> None:
        self._unvisited.add(node.name)
        self.scope_of[node.name] = self._scope
        self._scope.bind(node.name.value, node)

    def visit_Param_annotation(self, node: cst.Param) -> None:
        self._stack.append(self._scope.parent)

    def leave_Param_annotation(self, node: cst.Param) -> None:
        self._stack.pop()

    def visit_Param_default(self, node: cst.Param) -> None:
        self._stack.append(self._scope.parent)

    def leave_Param_default(self, node: cst.Param) -> None:
        self._stack.pop()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        if node.type_parameters is not None:
            self._give_up("type parameters")
        self._unvisited.add(node.name)
        self.scope_of[node.name] = self._scope
        self._scope.bind(node.name.value, node)

    def visit_ClassDef_body(self, node: cst.ClassDef) -> None:
        self._stack.append(Scope("class", self._scope, node.name.value))

    def leave_ClassDef_body(self, node: cst.ClassDef) -> None:
        self._stack.pop()

    def _visit_comprehension(self, node: cst.ListComp | cst.SetComp | cst.DictComp | cst.GeneratorExp) -> None:
        scope = Scope("comprehension", self._scope)
        scope.in_element = True
        self._first_for[node.for_in] = scope
        self._stack.append(scope)

    def _leave_comprehension(self, node: cst.CSTNode) -> None:
        self._stack.pop()

    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._visit_comprehension(node)

    def leave_ListComp(self, original_node: cst.ListComp) -> None:
        self._leave_comprehension(original_node)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._visit_comprehension(node)

    def leave_SetComp(self, original_node: cst.SetComp) -> None:
        self._leave_comprehension(original_node)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._visit_comprehension(node)

    def leave_DictComp(self, original_node: cst.DictComp) -> None:
        self._leave_comprehension(original_node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._visit_comprehension(node)

    def leave_GeneratorExp(self, original_node: cst.GeneratorExp) -> None:
        self._leave_comprehension(original_node)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        scope = self._first_for.get(node)
        if scope is not None:
            scope.in_element = False
        self._store(node.target)

    def leave_CompFor_target(self, node: cst.CompFor) -> None:
        if node in self._first_for:
            self._scope.count += 1

    def visit_CompFor_iter(self, node: cst.CompFor) -> None:
        if node in self._first_for:
            self._stack.append(self._scope.parent)

    def leave_CompFor_iter(self, node: cst.CompFor) -> None:
        if node in self._first_for:
            self._stack.pop()

    def leave_CompFor(self, original_node: cst.CompFor) -> None:
        if self._first_for.pop(original_node, None) is None:
            self._scope.count += 1

    # --- the end of an assignment-like node counts (libcst's _ASSIGNMENT_LIKE_NODES) -----

    def leave_Assign(self, original_node: cst.Assign) -> None:
        self._count(original_node)

    def leave_AnnAssign(self, original_node: cst.AnnAssign) -> None:
        self._count(original_node)

    def leave_AugAssign(self, original_node: cst.AugAssign) -> None:
        self._count(original_node)

    def leave_AsName(self, original_node: cst.AsName) -> None:
        self._count(original_node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._count(original_node)

    def leave_Parameters(self, original_node: cst.Parameters) -> None:
        self._count(original_node)

    def leave_WithItem(self, original_node: cst.WithItem) -> None:
        self._count(original_node)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        # libcst binds the target in the scope being visited (a comprehension's too) and
        # counts it when the expression ends; source order agrees with libcst's visiting
        # order except in a comprehension's element and a function's header.
        if self._scope.in_element or self._function_headers:
            self._give_up("assignment expression in a comprehension element or a function header")
        self._store(node.target)

    def leave_NamedExpr(self, original_node: cst.NamedExpr) -> None:
        self._count(original_node)

    def visit_TypeAlias(self, node: cst.TypeAlias) -> None:
        self._give_up("type alias")


class NameResolution:
    """Answers, after the traversal, what libcst's scope of an expression would answer."""

    def __init__(self, builder: ScopeBuilder) -> None:
        self._scope_of = builder.scope_of
        self._accesses = builder.accesses

    def qualified_names(self, expr: cst.BaseExpression) -> set[QualifiedName]:
        scope = self._scope_of.get(expr)
        if scope is None or not isinstance(expr, (cst.Name, cst.Attribute, cst.Call)):
            return set()
        access = self._access_at(expr)
        if access is not None:
            return {
                name
                for binding in referents(access)
                for name in _qualified_names(binding, binding.name)
            }
        full_name = get_full_name_for_node(expr)
        if full_name is None:
            return set()
        bindings: list[Binding] = []
        prefix: str | None = full_name
        while prefix:
            if scope.contains(prefix):
                bindings = scope.resolve(prefix)
                break
            idx = prefix.rfind(".")
            prefix = None if idx == -1 else prefix[:idx]
        for binding in bindings:
            if binding.kind != "builtin" and _is_binding_node(expr, binding.node):
                return _qualified_names(binding, full_name)
        names: set[QualifiedName] = set()
        for binding in bindings:
            names |= _qualified_names(binding, full_name)
        return names

    def bindings(self, name: cst.Name) -> list[Binding] | None:
        """The bindings `name` may refer to (libcst's `scope[name]`); None when unscoped."""
        scope = self._scope_of.get(name)
        if scope is None:
            return None
        return scope.resolve(name.value)

    def _access_at(self, expr: cst.BaseExpression) -> Access | None:
        """The access whose node `expr` is: a read name, or the dotted prefix libcst
        attaches a read name to when that prefix is bound (`import a.b`; `a.b.c`)."""
        leftmost = expr
        while isinstance(leftmost, cst.Attribute):
            leftmost = leftmost.value
        access = self._accesses.get(leftmost) if isinstance(leftmost, cst.Name) else None
        if access is None:
            return None
        if access.resolved_node is None:
            access.resolved_node, access.resolved_name = access.name, access.name.value
            if access.enclosing_attribute is not None:
                for dotted, node in _dotted_names(access.enclosing_attribute):
                    if access.scope.contains(dotted):
                        access.resolved_node, access.resolved_name = node, dotted
                        break
        return access if access.resolved_node is expr else None


def _qualified_names(binding: Binding, full_name: str) -> set[QualifiedName]:
    if binding.kind == "builtin":
        return {QualifiedName(f"builtins.{binding.name}", QualifiedNameSource.BUILTIN)}
    if binding.kind == "local":
        prefix = binding.scope.name_prefix
        return {QualifiedName(f"{prefix}.{full_name}" if prefix else full_name, QualifiedNameSource.LOCAL)}
    return _imported_names(binding.node, full_name)


def _dotted_names(node: cst.BaseExpression) -> Iterator[tuple[str, cst.CSTNode]]:
    """libcst's `_gen_dotted_names`: `a.b.c` gives a.b.c, a.b, a with their nodes."""
    if isinstance(node, cst.Name):
        yield node.value, node
        return
    if not isinstance(node, cst.Attribute):
        return
    value = node.value
    if isinstance(value, cst.Call):
        if isinstance(value.func, (cst.Attribute, cst.Name)):
            yield from _dotted_names(value.func)
    elif isinstance(value, (cst.Attribute, cst.Name)):
        inner = list(_dotted_names(value))
        if inner:
            yield f"{inner[0][0]}.{node.attr.value}", node
            yield from inner


def _is_binding_node(node: cst.CSTNode, binding_node: cst.CSTNode | None) -> bool:
    if node is binding_node:
        return True
    if isinstance(binding_node, (cst.Import, cst.ImportFrom)) and not isinstance(binding_node.names, cst.ImportStar):
        for alias in binding_node.names:
            if alias.name is node or (alias.asname is not None and alias.asname.name is node):
                return True
    return False


def _imported_names(node: cst.Import | cst.ImportFrom, full_name: str) -> set[QualifiedName]:
    """libcst's rule (`name_scopes.imported_names`) on this tree's import."""
    module = ""
    if isinstance(node, cst.ImportFrom):
        module = "." * len(node.relative) + ((get_full_name_for_node(node.module) or "") if node.module else "")
    if isinstance(node.names, cst.ImportStar):
        return set()
    aliases = [
        (real_name, alias.evaluated_alias if alias.asname else None)
        for alias in node.names if (real_name := get_full_name_for_node(alias.name))
    ]
    return {QualifiedName(name, QualifiedNameSource.IMPORT) for name in imported_names(module, aliases, full_name)}
