"""Code summaries from `ast`: what each function of a file binds, builds, returns and calls,
in the form of `ckptlint.model.form.summary`. Flow-insensitive: a summary lists every binding in
its body in source order (`x = e`, `for x in e`, `xs.append(e)`, `self.add_module(name, e)`),
with the `if` tests that guard it, what it returns, its parameters with their defaults and
the classes their annotations name, and the calls that pass project functions something to
follow. Expressions nested deeper than `MAX_DEPTH` are `("?",)`: generated code cannot make
a summary large.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from ckptlint.model.syntax.annotations import annotated_classes
from ckptlint.model.syntax.ast_walk import CHILDREN, child_nodes, walk
from ckptlint.model.file_facts.ast_expressions import condition, expression, pattern
from ckptlint.model.file_facts.dict_stores import dict_stores, keyed_value
from ckptlint.model.library.combined import INTERPRETED_FUNCTIONS, LIBRARY_PREFIXES
from ckptlint.model.library.torch import REGISTERING_METHODS
from ckptlint.model.library.transformers import is_model_loader
from ckptlint.model.form.summary import (
    ADD,
    ADD_ELEMENTS,
    ASSIGN,
    ITEM,
    ELEMENTS,
    UNKNOWN,
    Binding,
    Conditions,
    Expr,
    FunctionSummary,
    Parameter,
)

_ADDING_METHODS = {"append": ADD, "insert": ADD, "add": ADD, "appendleft": ADD, "extend": ADD_ELEMENTS}



def is_known(expr: Expr) -> bool:
    """Whether an expression says anything the model can follow (not a bare constant or `?`)."""
    return expr[0] not in ("?", "const")


def summarize(
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Module | ast.ClassDef,
    name: str,
    resolve: Callable[[ast.AST], str | None],
    *,
    self_name: str | None = None,
) -> FunctionSummary | None:
    """The summary of a function (or of a module's top-level code, or of a class body: its
    class attributes); None when it binds, returns and calls nothing the model can follow."""
    parameters: tuple[Parameter, ...] = ()
    top_level = isinstance(node, (ast.Module, ast.ClassDef))
    if not top_level:
        parameters = _parameters(node.args, resolve)
    summary = _Summarizer(
        self_name, resolve, keeps_constants=isinstance(node, ast.ClassDef),
        parameter_names=frozenset(p.name for p in parameters if p.kind not in ("*", "**")),
        keeps_flags=isinstance(node, ast.Module),
    )
    summary.block(node.body, ())
    # A module's top-level names are other functions' globals, a class body's are its
    # instances' attributes: every binding may be asked about.
    bindings = summary.bindings if top_level else _needed(
        summary.bindings, summary.returns, summary.calls, self_name, summary.checkpointed + summary.passes
    )
    if isinstance(node, ast.Module) and any(b.value[0] == "const" for b in bindings):
        # A flag some function rebinds (`global USE_REENTRANT`) is not the constant it starts as.
        rebound = {name for n in walk(node) if isinstance(n, ast.Global) for name in n.names}
        bindings = [b for b in bindings if not (b.value[0] == "const" and b.pattern[0] == "name" and b.pattern[1] in rebound)]
    if not (bindings or summary.returns or summary.calls or parameters):
        return None
    return FunctionSummary(
        name, parameters, tuple(bindings), tuple(summary.returns), tuple(summary.calls), self_name,
        tuple(summary.nested), tuple(zip(summary.passes, summary.pass_lines)), _is_property(node),
    )


def _is_property(node: ast.AST) -> bool:
    """`@property`, `@functools.cached_property`: read as an attribute, not called."""
    return any(
        (isinstance(d, ast.Name) and d.id in _PROPERTIES) or (isinstance(d, ast.Attribute) and d.attr in _PROPERTIES)
        for d in getattr(node, "decorator_list", ())
    )


_SHORT_STRING = 100  # longer module-level strings (templates, prompts) are no option values
_PROPERTIES = frozenset({"property", "cached_property"})


def _needed(
    bindings: list[Binding], returns: list, calls: list, self_name: str | None, checkpointed: list
) -> list[Binding]:
    """The bindings the model can ever ask about: of `self` attributes and children, loop
    targets, and the local names that what the function returns, calls, stores on `self` or
    hands to a checkpoint call depends on (`h = layer(h)` in a forward pass is not one of them)."""
    kept = [b for b in bindings if _stores_on_self(b.pattern, self_name) or b.how == ELEMENTS]
    needed: set[str] = set()
    pending: list = [value for value, _ in returns] + [callee for callee, _ in calls] + checkpointed
    pending += [part for b in kept for part in (b.value, b.conditions)]
    pending += [conditions for _, conditions in returns]
    by_name: dict[str, list[Binding]] = {}
    for binding in bindings:
        if not _stores_on_self(binding.pattern, self_name):
            for name in _names_bound(binding.pattern):
                by_name.setdefault(name, []).append(binding)
    while pending:
        for name in _names_read(pending.pop()):
            if name not in needed:
                needed.add(name)
                for binding in by_name.get(name, ()):
                    pending.extend((binding.value, binding.conditions))
    found = set(map(id, kept))
    return [b for b in bindings if id(b) in found or any(n in needed for n in _names_bound(b.pattern))]


def _stores_on_self(target: Expr, self_name: str | None) -> bool:
    if target[0] == "child":
        return True
    if target[0] == "seq":  # `self.bn1, self.bn2 = ...`
        return any(_stores_on_self(item, self_name) for item in target[1])
    while target[0] in ("attr", "index"):
        if target[0] == "attr" and target[1] == ("name", self_name):
            return True
        target = target[1]
    return False


def _names_bound(target: Expr) -> list[str]:
    if target[0] == "name":
        return [target[1]]
    if target[0] in ("seq",):
        return [name for item in target[1] for name in _names_bound(item)]
    if target[0] == "star":
        return _names_bound(target[1])
    return []


def _names_read(value) -> set[str]:
    found: set[str] = set()
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, tuple):
            if len(item) == 2 and item[0] == "name" and isinstance(item[1], str):
                found.add(item[1])
            else:
                pending.extend(part for part in item if isinstance(part, tuple))
    return found


class _Summarizer:
    """Walks a body statement by statement, with the `if` conditions that guard each one
    (an `if` whose body returns guards what follows it with the opposite condition)."""

    def __init__(
        self,
        self_name: str | None,
        resolve: Callable[[ast.AST], str | None],
        *,
        keeps_constants: bool = False,
        parameter_names: frozenset[str] = frozenset(),
        keeps_flags: bool = False,
    ) -> None:
        self.self_name = self_name
        self.resolve = resolve
        # A call of a parameter (`block(inplanes, planes, norm_cfg=norm_cfg)` in a builder
        # handed the block class) constructs whatever the callers pass: a call site too.
        self.parameter_names = parameter_names
        # A class body's literal attributes are what its instances read (`norm: str = "ln"`
        # of a config dataclass); a function's literal locals are not kept.
        self.keeps_constants = keeps_constants
        # A module's True / False constants are flags its code reads (`use_reentrant=not
        # USE_REENTRANT`, `USE_REENTRANT` imported from a settings module).
        self.keeps_flags = keeps_flags
        self.bindings: list[Binding] = []
        self.returns: list[tuple[Expr, Conditions]] = []
        self.calls: list[tuple[Expr, int]] = []
        self.nested: list[str] = []
        # What calls that look like checkpointing (`cp.checkpoint(...)`, `checkpoint_seq(...)`,
        # `self._gradient_checkpointing_func(...)`) are given: rules evaluate those.
        self.checkpointed: list[Expr] = []
        self.passes: list[Expr] = []
        self.pass_lines: list[int] = []
        self._seen: set = set()

    def block(self, statements: Sequence[ast.stmt], conditions: Conditions) -> None:
        for statement in statements:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.nested.append(statement.name)
                continue
            if isinstance(statement, ast.ClassDef):
                continue
            if isinstance(statement, ast.If):
                test = condition(statement.test)
                self.expressions([statement.test], statement.lineno, conditions)
                self.block(statement.body, (*conditions, (test, True)))
                self.block(statement.orelse, (*conditions, (test, False)))
                if _leaves(statement.body) and not _leaves(statement.orelse):
                    conditions = (*conditions, (test, False))
                elif _leaves(statement.orelse) and statement.orelse and not _leaves(statement.body):
                    conditions = (*conditions, (test, True))
                continue
            self.statement(statement, conditions)

    def value(self, node: ast.AST) -> Expr:
        """An expression the model may follow; a library function's result (a tensor: `x =
        F.relu(x)`, `h = torch.cat(...)`) is nothing to it, and not kept."""
        if self.keeps_constants and isinstance(node, ast.Call) and self.resolve(node.func) == "dataclasses.field":
            # `out_norm: str = field(default="rms2d")`: the class attribute is the default
            default = next((k.value for k in node.keywords if k.arg == "default"), None)
            return expression(default) if default is not None else UNKNOWN
        if isinstance(node, ast.Call) and self._library_function(node.func):
            return UNKNOWN
        return expression(node)

    def _kept_constant(self, value: Expr) -> bool:
        if value[0] != "const":
            return False
        # A module's flags and short strings (`FSDP_MODE = "full_shard auto_wrap"`), read by
        # other functions as globals.
        return self.keeps_constants or (
            self.keeps_flags and (isinstance(value[1], bool) or (isinstance(value[1], str) and len(value[1]) <= _SHORT_STRING))
        )

    def _library_function(self, func: ast.AST) -> bool:
        if not isinstance(func, (ast.Name, ast.Attribute)):
            return False
        name = self.resolve(func)
        return (
            name is not None
            and name.startswith(LIBRARY_PREFIXES)
            and not name.rsplit(".", 1)[-1][:1].isupper()
            and name not in INTERPRETED_FUNCTIONS
            and not is_model_loader(name)
        )

    def _calls_project_code(self, call: ast.Call) -> bool:
        name = self.resolve(call.func)
        return name is not None and not name.startswith(LIBRARY_PREFIXES)

    def _applies_project_function(self, call: ast.Call, callee: Expr) -> bool:
        """`model.apply(set_bn_eval)`: torch runs a project function on every module below
        `model` (`CallSites.applications`)."""
        if not (callee[0] == "attr" and callee[2] == "apply" and len(call.args) == 1 and not call.keywords):
            return False
        function = call.args[0]
        name = self.resolve(function) if isinstance(function, (ast.Name, ast.Attribute)) else None
        return name is not None and not name.startswith(LIBRARY_PREFIXES)

    def _passes_to_project(self, call: ast.Call, callee: Expr) -> bool:
        """A call of a global function or a method of `self` that passes it a name, an
        attribute or a call's result, or a flag (`Backbone(norm_eval=False)`, `Stem(64,
        True)`); not one passing only other constants."""
        own_method = callee[0] == "attr" and callee[1] == ("name", self.self_name) and self.self_name is not None
        through_parameter = callee[0] == "name" and callee[1] in self.parameter_names
        if self._applies_project_function(call, callee):
            return True
        if not own_method and not through_parameter and not _is_super_init(callee) and self.resolve(call.func) is None:
            return False
        passed = [*call.args, *(k.value for k in call.keywords)]
        return any(isinstance(_bare(value), (ast.Name, ast.Attribute, ast.Subscript, ast.Call)) for value in passed) or any(
            isinstance(k.value, ast.Constant) and isinstance(k.value.value, bool) for k in call.keywords
        ) or any(  # a choice by name: `Net("bn")`, `build(norm="syncbn")`; a flag by position
            isinstance(value, ast.Constant) and isinstance(value.value, (str, bool)) for value in passed
        )

    def statement(self, node: ast.stmt, conditions: Conditions) -> None:
        line = node.lineno
        if isinstance(node, ast.Assign):
            value = self.value(node.value)
            # A `self` attribute is kept whatever its value: assigned something not known is
            # not the same as never assigned (which falls back to children added by name).
            self.bindings.extend(
                Binding(pattern(t), ASSIGN, value, line, 0, conditions) for t in node.targets
                if is_known(value) or _stores_on_self(pattern(t), self.self_name) or self._kept_constant(value)
            )
            # `layers["down"] = conv_bn(...)` into an `OrderedDict()` later made a Sequential,
            # `self.stages[name] = Stage(...)` into a `ModuleDict()`: a member added to the
            # container, as `append` adds one (a constant stored by key is no module). Under
            # a literal key, the key too (`ITEM`), and a constant as well:
            # `kwargs["norm_layer"] = nn.BatchNorm2d` (or `= "groupnorm"`) then
            # `Block(**kwargs)` passes it.
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, (ast.Name, ast.Attribute)):
                    stored = keyed_value(t, value)
                    if value[0] in ("call", "name", "attr") or (stored[0] == ITEM and value[0] == "const"):
                        self.bindings.append(Binding(pattern(t.value), ADD, stored, line, 0, conditions))
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            value = self.value(node.value)
            if is_known(value) or self._kept_constant(value):
                self.bindings.append(Binding(pattern(node.target), ASSIGN, value, line, 0, conditions))
        elif isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add):
            value = self.value(node.value)
            if is_known(value):
                self.bindings.append(Binding(pattern(node.target), ADD_ELEMENTS, value, line, 0, conditions))
        elif isinstance(node, ast.Return) and node.value is not None:
            value = self.value(node.value)
            if is_known(value):
                self.returns.append((value, conditions))
        if isinstance(node, (ast.For, ast.AsyncFor)):
            iterable = expression(node.iter)
            if is_known(iterable):
                end = node.end_lineno or line
                self.bindings.append(Binding(pattern(node.target), ELEMENTS, iterable, line, end, conditions))
            self.expressions([node.iter], line, conditions)
            self.block(node.body, conditions)
            self.block(node.orelse, conditions)
        elif isinstance(node, ast.While):
            self.expressions([node.test], line, conditions)
            self.block(node.body, conditions)
            self.block(node.orelse, conditions)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                value = expression(item.context_expr)
                if item.optional_vars is not None and is_known(value):
                    self.bindings.append(Binding(pattern(item.optional_vars), ASSIGN, value, line, 0, conditions))
            self.expressions([item.context_expr for item in node.items], line, conditions)
            self.block(node.body, conditions)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            self.block(node.body, conditions)
            for handler in node.handlers:
                self.block(handler.body, conditions)
            self.block(node.orelse, conditions)
            self.block(node.finalbody, conditions)
        elif isinstance(node, ast.Match):
            self.expressions([node.subject], line, conditions)
            for case in node.cases:
                self.block(case.body, conditions)
        else:
            self.expressions([node], line, conditions)

    def expressions(self, nodes: Sequence[ast.AST], line: int, conditions: Conditions) -> None:
        """The calls in expressions (not in lambdas or nested definitions)."""
        pending = list(nodes)
        while pending:
            node = pending.pop()
            if isinstance(node, ast.Lambda):
                continue
            if isinstance(node, ast.Call):
                binding = _binding_call(node, self.self_name, conditions)
                if binding is not None:
                    self.bindings.append(binding)
                self.bindings.extend(dict_stores(node, conditions))
                callee = expression(node.func)
                if _looks_like_checkpointing(node.func):
                    # What it runs, and how it is configured (`use_reentrant=flag`,
                    # `checkpoint_wrapper_fn=wrapper`): the model evaluates both.
                    self.checkpointed.extend(expression(arg) for arg in node.args)
                    self.checkpointed.extend(expression(k.value) for k in node.keywords)
                if _is_super_init(callee) and self._passes_to_project(node, callee):
                    # not a call the model runs, but what the base's constructor is given
                    self.passes.append(expression(node))
                    self.pass_lines.append(node.lineno)
                elif _runs_code(callee) and not self._library_function(node.func):
                    if (callee, node.lineno) not in self._seen:
                        self._seen.add((callee, node.lineno))
                        self.calls.append((callee, node.lineno))
                    # Every call passing something, two on one line too (`Head(norm="bn")
                    # if seg else Head()`).
                    if self._passes_to_project(node, callee):
                        self.passes.append(expression(node))
                        self.pass_lines.append(node.lineno)
                    elif self._calls_project_code(node):
                        # A call of a project function or class passing only constants (or
                        # nothing): kept without its arguments, so that a default known to
                        # run somewhere is seen (`passed_at_every_call`).
                        self.passes.append(("call", callee, (), ()))
                        self.pass_lines.append(node.lineno)
            children = node.__dict__.get(CHILDREN)
            pending.extend(children if children is not None else child_nodes(node))


def _is_super_init(callee: Expr) -> bool:
    """`super().__init__`: what a subclass's constructor passes its base's."""
    return callee[0] == "attr" and callee[2] == "__init__" and callee[1][:2] == ("call", ("name", "super"))


def _bare(node: ast.AST) -> ast.AST:
    return node.value if isinstance(node, ast.Starred) else node


def _looks_like_checkpointing(func: ast.AST) -> bool:
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return "checkpoint" in name or "ckpt" in name


def _leaves(body: Sequence[ast.stmt]) -> bool:
    """Whether a block always leaves (returns, raises, continues, breaks)."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


def _runs_code(callee: Expr) -> bool:
    """A callee that may run a module or a function of the project: a name or an attribute
    chain (not `super().__init__`, not a method of a call's result), or a base's method
    called through `super()` (`super().forward(x)`)."""
    if callee[0] == "attr" and callee[1][:2] == ("call", ("name", "super")) and callee[2] != "__init__":
        return True
    while callee[0] == "attr":
        callee = callee[1]
    return callee[0] == "name" and callee[1] not in ("super", "print", "len", "range", "isinstance", "getattr")


def _binding_call(call: ast.Call, self_name: str | None, conditions: Conditions = ()) -> Binding | None:
    """`xs.append(e)`, `self.add_module("name", e)`, `setattr(self, "name", e)`."""
    func = call.func
    line = call.lineno
    if isinstance(func, ast.Attribute) and func.attr in _ADDING_METHODS and call.args:
        value = call.args[-1] if func.attr == "insert" else call.args[0]
        return Binding(pattern(func.value), _ADDING_METHODS[func.attr], expression(value), line, 0, conditions)
    registering = (
        isinstance(func, ast.Attribute)
        and func.attr in REGISTERING_METHODS
        and isinstance(func.value, ast.Name)
        and func.value.id == self_name
    )
    if (
        isinstance(func, ast.Attribute)
        and func.attr in ("add_module", "register_module")
        and not registering
        and len(call.args) >= 2
    ):
        # `self.layers = nn.Sequential()` then `self.layers.add_module(str(i), Block())`: a
        # member added to that container, as `append` adds one to a `ModuleList`.
        return Binding(pattern(func.value), ADD, expression(call.args[1]), line, 0, conditions)
    if registering and call.args:
        if len(call.args) == 1 and isinstance(call.args[0], ast.Starred):
            # `self.add_module(*stage)` with `stage = (name, module)`.
            return Binding(("child", None), ASSIGN, ("index", expression(call.args[0].value), ("const", 1)), line, 0, conditions)
        if len(call.args) >= 2:
            child = ("child", _constant_name(call.args[0]))
            return Binding(child, ASSIGN, expression(call.args[1]), line, 0, conditions)
    if (
        isinstance(func, ast.Attribute)
        and func.attr == "__init__"
        and isinstance(func.value, ast.Call)
        and isinstance(func.value.func, ast.Name)
        and func.value.func.id == "super"
        and call.args
    ):
        # `super().__init__(*layers)` in a subclass of `nn.Sequential` / `nn.ModuleList`:
        # its members are its children (`flatten_modules` keeps only the modules).
        members = tuple(
            ("star", expression(arg.value)) if isinstance(arg, ast.Starred) else expression(arg) for arg in call.args
        )
        return Binding(("child", None), ASSIGN, ("seq", members), line, 0, conditions)
    if (
        isinstance(func, ast.Name)
        and func.id == "setattr"
        and len(call.args) == 3
        and isinstance(call.args[0], ast.Name)
        and call.args[0].id == self_name
    ):
        child = ("child", _constant_name(call.args[1]))
        return Binding(child, ASSIGN, expression(call.args[2]), line, 0, conditions)
    return None


def _constant_name(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _parameters(arguments: ast.arguments, resolve: Callable[[ast.AST], str | None]) -> tuple[Parameter, ...]:
    positional = [*arguments.posonlyargs, *arguments.args]
    defaults: list[ast.AST | None] = [None] * (len(positional) - len(arguments.defaults)) + list(arguments.defaults)
    found = [
        Parameter(a.arg, expression(d) if d is not None else None, annotated_classes(a.annotation, resolve), "positional")
        for a, d in zip(positional, defaults)
    ]
    if arguments.vararg is not None:
        found.append(Parameter(arguments.vararg.arg, None, (), "*"))
    found.extend(
        Parameter(a.arg, expression(d) if d is not None else None, annotated_classes(a.annotation, resolve), "keyword")
        for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults)
    )
    if arguments.kwarg is not None:
        found.append(Parameter(arguments.kwarg.arg, None, (), "**"))
    return tuple(found)
