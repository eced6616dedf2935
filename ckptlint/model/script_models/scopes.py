"""The qualified names of a file's names and attributes, from its `ast` tree: what libcst's
`QualifiedNameProvider` answers, rule for rule, so that an answer does not depend on which
tree asks: the interpreter asks with `ast` nodes, the rules with libcst ones
(`analysis/file_names.py`, through the bridge that pairs the two trees' expressions).

Scopes and bindings are built in one pass in the order libcst visits the code; an access
sees a binding of its own scope only when an assignment-like statement finished between
them (libcst's index), and a name in a comprehension's element is resolved at the end of
its comprehension. Where libcst's treatment depends on its visiting order in ways this pass
does not reproduce, `ScopeNames.unsupported` says why (assignment expressions in a
comprehension's element or a function's header, PEP 695 type parameters and aliases,
`TypeVar` / `NewType` calls whose first argument is not a string, `nonlocal` at module
level): libcst's own provider answers for such a file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ckptlint.model.syntax.name_scopes import Access, Binding, Scope, imported_names, referents
from ckptlint.model.script_models.names import QualifiedName
from ckptlint.model.script_models.syntax import arguments_of

_TYPING_CALLS = frozenset({"TypeVar", "NewType"})  # libcst skips their first argument
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_TRY = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


class ScopeNames:
    """`ScriptNames` from the `ast` tree: built once, asked per expression."""

    def __init__(self, tree: ast.Module) -> None:
        self.builtins = Scope("builtin", None)
        self.module_scope = Scope("global", self.builtins)
        self.unsupported: str | None = None
        self._scope_of: dict[int, Scope] = {}
        self._accesses: dict[int, Access] = {}
        self._answers: dict[int, frozenset[QualifiedName]] = {}
        self._stack: list[Scope] = [self.module_scope]
        self._attribute_frames: list[ast.Attribute | None] = [None]
        self._stored: set[int] = set()
        self._opaque = 0
        self._function_headers = 0
        self._typing_aliases: set[str] = set(_TYPING_CALLS)
        self._tree = tree  # the ids above are its nodes'
        for statement in tree.body:
            self._statement(statement)

    # --- questions ---------------------------------------------------------------------

    def qualified(self, expr: ast.expr) -> frozenset[QualifiedName]:
        found = self._answers.get(id(expr))
        if found is None:
            found = self._answers[id(expr)] = self._qualified(expr)
        return found

    def scope_of(self, expr: ast.expr) -> Scope | None:
        """The scope a name, attribute or call of the tree is read or bound in."""
        return self._scope_of.get(id(expr))

    def _qualified(self, expr: ast.expr) -> frozenset[QualifiedName]:
        scope = self._scope_of.get(id(expr))
        if scope is None or not isinstance(expr, (ast.Name, ast.Attribute, ast.Call)):
            return frozenset()
        access = self._access_at(expr)
        if access is not None:
            return frozenset(name for binding in referents(access) for name in _qualified_names(binding, binding.name))
        full_name = full_name_of(expr)
        if full_name is None:
            return frozenset()
        bindings: list[Binding] = []
        prefix: str | None = full_name
        while prefix:
            if scope.contains(prefix):
                bindings = scope.resolve(prefix)
                break
            idx = prefix.rfind(".")
            prefix = None if idx == -1 else prefix[:idx]
        for binding in bindings:
            if binding.node is expr:  # a name assigned to: that assignment's alone
                return frozenset(_qualified_names(binding, full_name))
        names: set[QualifiedName] = set()
        for binding in bindings:
            names |= _qualified_names(binding, full_name)
        return frozenset(names)

    def _access_at(self, expr: ast.expr) -> Access | None:
        leftmost = expr
        while isinstance(leftmost, ast.Attribute):
            leftmost = leftmost.value
        access = self._accesses.get(id(leftmost)) if isinstance(leftmost, ast.Name) else None
        if access is None:
            return None
        if access.resolved_node is None:
            access.resolved_node, access.resolved_name = access.name, access.name.id
            if access.enclosing_attribute is not None:
                for dotted, node in _dotted_names(access.enclosing_attribute):
                    if access.scope.contains(dotted):
                        access.resolved_node, access.resolved_name = node, dotted
                        break
        return access if access.resolved_node is expr else None

    # --- building: the order libcst visits in ---------------------------------------------

    @property
    def _scope(self) -> Scope:
        return self._stack[-1]

    def _give_up(self, reason: str) -> None:
        if self.unsupported is None:
            self.unsupported = reason

    def _count(self) -> None:
        if not self._opaque:
            self._scope.count += 1

    def _store(self, target: ast.AST) -> None:
        if isinstance(target, ast.Name):
            self._stored.add(id(target))
        elif isinstance(target, (ast.Tuple, ast.List)):
            for element in target.elts:
                self._store(element)
        elif isinstance(target, ast.Starred):
            self._store(target.value)

    def _statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            self._statement(statement)

    def _statement(self, node: ast.stmt) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self._function(node)
        elif isinstance(node, ast.ClassDef):
            if getattr(node, "type_params", None):
                self._give_up("type parameters")
            self._scope.bind(node.name, node)
            for expr in node.decorator_list:
                self._expr(expr)
            for expr in node.bases:
                self._expr(expr)
            for keyword in node.keywords:
                self._expr(keyword.value)
            self._stack.append(Scope("class", self._scope, node.name))
            self._statements(node.body)
            self._stack.pop()
            self._count()
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                self._store(target)
            for target in node.targets:
                self._expr(target)
            self._expr(node.value)
            self._count()
        elif isinstance(node, ast.AnnAssign):
            self._store(node.target)
            self._expr(node.target)
            self._expr(node.annotation)
            if node.value is not None:
                self._expr(node.value)
            self._count()
        elif isinstance(node, ast.AugAssign):
            self._store(node.target)
            self._expr(node.target)
            self._expr(node.value)
            self._count()
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._store(node.target)
            self._expr(node.target)
            self._scope.count += 1  # libcst's `leave_For_target`
            self._expr(node.iter)
            self._statements(node.body)
            self._statements(node.orelse)
        elif isinstance(node, ast.While):
            self._expr(node.test)
            self._statements(node.body)
            self._statements(node.orelse)
        elif isinstance(node, ast.If):
            self._expr(node.test)
            self._statements(node.body)
            self._statements(node.orelse)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                self._expr(item.context_expr)
                if item.optional_vars is not None:  # an `as` name: stored, counted on leaving it
                    if not self._opaque:
                        self._store(item.optional_vars)
                    self._expr(item.optional_vars)
                    self._count()
                self._count()  # the item
            self._statements(node.body)
        elif isinstance(node, _TRY):
            self._statements(node.body)
            for handler in node.handlers:
                if handler.type is not None:
                    self._expr(handler.type)
                if handler.name is not None:
                    self._bind_as(handler, handler.name)
                self._statements(handler.body)
            self._statements(node.orelse)
            self._statements(node.finalbody)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node)
        elif isinstance(node, ast.Global):
            if self._scope.kind != "global":
                for name in node.names:
                    self._scope.overwrites[name] = self.module_scope
            self._count()
        elif isinstance(node, ast.Nonlocal):
            if self._scope.kind == "global":
                self._give_up("nonlocal at module level")
            for name in node.names:
                self._scope.overwrites[name] = self._scope.parent
            self._count()
        elif isinstance(node, ast.Match):
            self._expr(node.subject)
            for case in node.cases:
                self._pattern(case.pattern)
                if case.guard is not None:
                    self._expr(case.guard)
                self._statements(case.body)
        elif type(node).__name__ == "TypeAlias":
            self._give_up("type alias")
        else:  # Expr, Return, Delete, Assert, Raise, Pass, Break, Continue
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self._expr(child)

    def _bind_as(self, node: ast.AST, name: str) -> None:
        """`except E as e`: libcst's `AsName` holding a stored `Name`."""
        if not self._opaque:
            self._scope.bind(name, node)
        self._count()

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        if getattr(node, "type_params", None):
            self._give_up("type parameters")
        self._scope.bind(node.name, node)
        function_scope = Scope("function", self._scope, node.name)
        self._function_headers += 1  # decorators, parameters and return annotation
        for expr in node.decorator_list:
            self._expr(expr)
        self._stack.append(function_scope)
        self._parameters(node.args)
        self._stack.pop()
        if node.returns is not None:
            self._expr(node.returns)
        self._function_headers -= 1
        self._stack.append(function_scope)
        self._statements(node.body)
        self._stack.pop()
        self._count()

    def _parameters(self, arguments: ast.arguments) -> None:
        """In the function's scope: each parameter bound, its annotation and default read in
        the enclosing scope; counted once all are."""
        positional = [*arguments.posonlyargs, *arguments.args]
        defaults = dict(zip(map(id, positional[len(positional) - len(arguments.defaults):]), arguments.defaults))
        defaults.update((id(a), d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None)
        everything = [*positional, *([arguments.vararg] if arguments.vararg else []), *arguments.kwonlyargs,
                      *([arguments.kwarg] if arguments.kwarg else [])]
        for param in everything:
            self._scope.bind(param.arg, param)
            for part in (param.annotation, defaults.get(id(param))):
                if part is not None:
                    self._stack.append(self._scope.parent)
                    self._expr(part)
                    self._stack.pop()
        self._count()

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            if alias.name == "*":
                break
            if alias.asname is not None:
                names = [alias.asname]
            else:
                parts = alias.name.split(".")
                names = [".".join(parts[:i]) for i in range(len(parts), 0, -1)]
            for name in names:
                self._scope.bind(name, node, "import", alias)
            if alias.name.rpartition(".")[2] in _TYPING_CALLS and alias.asname:
                self._typing_aliases.add(alias.asname)
        self._count()

    def _pattern(self, pattern: ast.AST) -> None:
        """A `case` pattern: its values and classes are read (its capture names bind nothing
        libcst's scopes see)."""
        for child in ast.walk(pattern):
            if isinstance(child, (ast.MatchValue,)):
                self._expr(child.value)
            elif isinstance(child, ast.MatchClass):
                self._expr(child.cls)

    def _expr(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            scope = self._scope
            self._scope_of[id(node)] = scope
            if id(node) in self._stored:
                scope.bind(node.id, node)
            else:
                index = None if scope.in_element else scope.count
                self._accesses[id(node)] = Access(node, scope, index, self._attribute_frames[-1])
        elif isinstance(node, ast.Attribute):
            self._scope_of[id(node)] = self._scope
            outermost = self._attribute_frames[-1] is None
            if outermost:
                self._attribute_frames[-1] = node
            self._expr(node.value)
            if outermost and self._attribute_frames[-1] is node:
                self._attribute_frames[-1] = None
        elif isinstance(node, ast.Call):
            self._scope_of[id(node)] = self._scope
            self._attribute_frames.append(None)
            full_name = full_name_of(node.func)
            arguments = arguments_of(node)
            if (
                full_name is not None
                and full_name.rpartition(".")[2] in self._typing_aliases
                and arguments
                and not (isinstance(arguments[0].value, ast.Constant) and isinstance(arguments[0].value.value, (str, bytes)))
            ):
                self._give_up("TypeVar/NewType call with a first argument that is not a string")
            self._expr(node.func)
            for arg in arguments:
                self._expr(arg.value)
            self._attribute_frames.pop()
        elif isinstance(node, ast.Lambda):
            self._stack.append(Scope("function", self._scope))
            self._parameters(node.args)
            self._expr(node.body)
            self._stack.pop()
        elif isinstance(node, ast.NamedExpr):
            if self._scope.in_element or self._function_headers:
                self._give_up("assignment expression in a comprehension element or a function header")
            self._store(node.target)
            self._expr(node.target)
            self._expr(node.value)
            self._count()
        elif isinstance(node, _COMPREHENSIONS):
            self._comprehension(node)
        elif isinstance(node, ast.IfExp):  # `body if test else orelse`, in that order
            self._expr(node.body)
            self._expr(node.test)
            self._expr(node.orelse)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if key is not None:
                    self._expr(key)
                self._expr(value)
        else:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self._expr(child)
                elif isinstance(child, (ast.keyword, ast.comprehension)):
                    self._expr(child.value if isinstance(child, ast.keyword) else child.iter)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        scope = Scope("comprehension", self._scope)
        scope.in_element = True
        self._stack.append(scope)
        if isinstance(node, ast.DictComp):
            self._expr(node.key)
            self._expr(node.value)
        else:
            self._expr(node.elt)
        for index, generator in enumerate(node.generators):
            first = index == 0
            if first:
                scope.in_element = False
            self._store(generator.target)
            self._expr(generator.target)
            if first:
                self._scope.count += 1
                self._stack.append(self._scope.parent)
            self._expr(generator.iter)
            if first:
                self._stack.pop()
            for condition in generator.ifs:
                self._expr(condition)
        # libcst leaves the nested `for`s innermost first, each but the first counting.
        self._scope.count += len(node.generators) - 1
        self._stack.pop()


def _qualified_names(binding: Binding, full_name: str) -> set[QualifiedName]:
    if binding.kind == "builtin":
        return {QualifiedName(f"builtins.{binding.name}", "builtin")}
    if binding.kind == "local":
        prefix = binding.scope.name_prefix
        return {QualifiedName(f"{prefix}.{full_name}" if prefix else full_name, "local")}
    return _imported_names(binding.node, full_name)


def full_name_of(node: ast.AST) -> str | None:
    """libcst's `get_full_name_for_node`: `a.b` of `a.b`, `a.b()`, `a.b[0]`; an attribute of
    something else is `None.attr`, as there."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{full_name_of(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return full_name_of(node.func)
    if isinstance(node, ast.Subscript):
        return full_name_of(node.value)
    return None


def _dotted_names(node: ast.AST) -> Iterator[tuple[str, ast.AST]]:
    """libcst's `_gen_dotted_names`: `a.b.c` gives a.b.c, a.b, a with their nodes."""
    if isinstance(node, ast.Name):
        yield node.id, node
        return
    if not isinstance(node, ast.Attribute):
        return
    value = node.value
    if isinstance(value, ast.Call):
        if isinstance(value.func, (ast.Attribute, ast.Name)):
            yield from _dotted_names(value.func)
    elif isinstance(value, (ast.Attribute, ast.Name)):
        inner = list(_dotted_names(value))
        if inner:
            yield f"{inner[0][0]}.{node.attr}", node
            yield from inner


def _imported_names(node: ast.Import | ast.ImportFrom, full_name: str) -> set[QualifiedName]:
    """libcst's rule (`name_scopes.imported_names`) on this tree's import."""
    module = "." * node.level + (node.module or "") if isinstance(node, ast.ImportFrom) else ""
    if any(alias.name == "*" for alias in node.names):
        return set()
    aliases = [(alias.name, alias.asname) for alias in node.names]
    return {QualifiedName(name, "import") for name in imported_names(module, aliases, full_name)}
