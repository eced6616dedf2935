"""Where each call of a file sits, tracked during the shared traversal (`SiteScopes`): the
class, the function, the loops and comprehensions, the guarding `if`s and the `isinstance`
guards that leave, so that an expression written at a call (the callable a checkpoint is
given, the module a wrapper wraps) is evaluated by the project model in the frame it runs in.
The base of the rules about checkpoint sites (`ckptlint.analysis.regions.RegionRule` and the
others that read what a site's expressions denote)."""

from __future__ import annotations

from dataclasses import replace

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.branches import leaving_isinstance_guard
from ckptlint.analysis.checkpoint_sites import CheckpointSite
from ckptlint.model.library.torch import Reentrancy
from ckptlint.analysis.model_expressions import comprehension_clauses, read
from ckptlint.analysis.fsdp import absolute_names
from ckptlint.model.form.values import Arguments, ClassRef, Constant, FunctionRef, Instance, Sequence
from ckptlint.model.library.torch import CHECKPOINT_IMPL_REENTRANT, TENSOR_BUILTINS, TENSOR_LIBRARIES, TENSOR_METHODS
from ckptlint.model.syntax.names import module_name
from ckptlint.model.form.summary import dotted_absolute
from ckptlint.rule import Rule


class SiteScopes(Rule):
    """Tracks, during the traversal, the class, the function and the loops each call sits
    in, so that an expression at a call (the callable a checkpoint is given) is evaluated by
    the project model in the frame it runs in."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._module = module_name(context.relative_path)
        self._scopes: list[tuple[str, str]] = []  # ("class" | "function", name), outermost first
        self._call_scopes: dict[cst.Call, tuple[tuple[str, str], ...]] = {}
        self._loops: list[dict[str, cst.BaseExpression]] = [{}]
        self._call_loops: dict[cst.Call, dict[str, cst.BaseExpression]] = {}
        # The comprehensions whose element a call sits in, outermost first (`[checkpoint_wrapper(el)
        # for el in model.blocks]`): what their targets are bound to where the call runs.
        self._comprehensions: list[cst.BaseComp | cst.DictComp] = []
        self._call_comprehensions: dict[cst.Call, tuple[cst.BaseComp | cst.DictComp, ...]] = {}
        self._calls: list[cst.Call] = []
        self._function_nodes: list[cst.FunctionDef] = []  # the definitions the traversal is inside
        self._call_functions: dict[cst.Call, cst.FunctionDef] = {}
        self._assigned_calls: dict[cst.Call, cst.Assign] = {}  # `out, features = checkpoint(...)`
        self._assigned_lambdas: dict[str, cst.Lambda] = {}  # `check_fn = lambda m: ...`
        self._guarding_ifs: list[cst.If] = []  # the `if` statements the traversal is inside
        self._call_guards: dict[cst.Call, tuple[cst.If, ...]] = {}
        # `if isinstance(block, MoEBlock): raise ...` (or return, continue, break): what the
        # statements after it in its block, and the blocks inside those, know `block` is not.
        self._ruled_out: list[list[tuple[str, cst.BaseExpression]]] = [[]]
        self._call_ruled_out: dict[cst.Call, tuple[tuple[str, cst.BaseExpression], ...]] = {}

    def visit_Assign(self, node: cst.Assign) -> None:
        if isinstance(node.value, cst.Lambda) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            self._assigned_lambdas[node.targets[0].target.value] = node.value
        elif isinstance(node.value, cst.Call):
            self._assigned_calls[node.value] = node

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._scopes.append(("class", node.name.value))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._scopes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._scopes.append(("function", node.name.value))
        self._function_nodes.append(node)
        self._loops.append({})

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._scopes.pop()
        self._function_nodes.pop()
        self._loops.pop()

    def visit_For(self, node: cst.For) -> None:
        sources = dict(self._loops[-1])
        if isinstance(node.target, cst.Name):
            sources[node.target.value] = node.iter
        elif (
            isinstance(node.target, cst.Tuple)
            and len(node.target.elements) == 2
            and isinstance(node.target.elements[1].value, cst.Name)
            and isinstance(node.iter, cst.Call)
        ):
            # `for i, block in enumerate(blocks)`, `for name, child in self.named_children()`
            enumerated = isinstance(node.iter.func, cst.Name) and node.iter.func.value == "enumerate" and node.iter.args
            sources[node.target.elements[1].value.value] = node.iter.args[0].value if enumerated else node.iter
        self._loops.append(sources)

    def leave_For(self, original_node: cst.For) -> None:
        self._loops.pop()

    # The element of a comprehension is visited before its `for` clauses.
    def visit_ListComp(self, node: cst.ListComp) -> None:
        self._enter_comprehension(node)

    def visit_SetComp(self, node: cst.SetComp) -> None:
        self._enter_comprehension(node)

    def visit_GeneratorExp(self, node: cst.GeneratorExp) -> None:
        self._enter_comprehension(node)

    def visit_DictComp(self, node: cst.DictComp) -> None:
        self._enter_comprehension(node)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        # Its iterable and conditions run outside the element's scope: a call there is not
        # evaluated with the targets bound (only the element's calls are).
        self._comprehensions.append(None)

    def leave_CompFor(self, original_node: cst.CompFor) -> None:
        self._comprehensions.pop()

    def _enter_comprehension(self, node: cst.BaseComp | cst.DictComp) -> None:
        self._comprehensions.append(node)
        sources = dict(self._loops[-1])
        clause = node.for_in
        if clause.inner_for_in is None and isinstance(clause.target, cst.Name):
            sources[clause.target.value] = clause.iter  # how a message names the modules
        self._loops.append(sources)

    def _leave_comprehension(self) -> None:
        self._comprehensions.pop()
        self._loops.pop()

    def leave_ListComp(self, original_node: cst.ListComp) -> None:
        self._leave_comprehension()

    def leave_SetComp(self, original_node: cst.SetComp) -> None:
        self._leave_comprehension()

    def leave_GeneratorExp(self, original_node: cst.GeneratorExp) -> None:
        self._leave_comprehension()

    def leave_DictComp(self, original_node: cst.DictComp) -> None:
        self._leave_comprehension()

    def visit_If(self, node: cst.If) -> None:
        self._guarding_ifs.append(node)

    def leave_If(self, original_node: cst.If) -> None:
        self._guarding_ifs.pop()
        ruled_out = leaving_isinstance_guard(original_node)
        if ruled_out is not None:
            self._ruled_out[-1].append(ruled_out)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self._ruled_out.append([])

    def leave_IndentedBlock(self, original_node: cst.IndentedBlock) -> None:
        self._ruled_out.pop()

    def visit_Call(self, node: cst.Call) -> None:
        self._calls.append(node)
        self._call_scopes[node] = tuple(self._scopes)
        if self._function_nodes:
            self._call_functions[node] = self._function_nodes[-1]
        self._call_loops[node] = self._loops[-1]
        if self._comprehensions and self._comprehensions[-1] is not None:
            self._call_comprehensions[node] = tuple(c for c in self._comprehensions if c is not None)
        self._call_guards[node] = tuple(self._guarding_ifs)
        if any(self._ruled_out):
            self._call_ruled_out[node] = tuple(guard for block in self._ruled_out for guard in block)

    def function_of(self, call: cst.Call) -> cst.FunctionDef | None:
        """The function definition a call is written in (None at a module's or class's top level)."""
        return self._call_functions.get(call)

    def assignment_of(self, call: cst.Call) -> cst.Assign | None:
        """The assignment whose whole value the call is (`out, features = checkpoint(...)`)."""
        return self._assigned_calls.get(call)

    def not_ruled_out(self, call: cst.Call, expr: cst.BaseExpression, values: frozenset) -> frozenset:
        """`values` of `expr` at `call` without the module instances a leaving `isinstance`
        guard before it rules out (`if isinstance(block, MoEBlock): raise ...` then
        `checkpoint_wrapper(block)`: no `MoEBlock`, nor a subclass of it, is wrapped)."""
        guards = [classes for name, classes in self._call_ruled_out.get(call, ()) if isinstance(expr, cst.Name) and expr.value == name]
        if not guards:
            return values
        excluded = {ref.name for classes in guards for value in self.values_at(call, classes)[1] for ref in class_refs(value)}
        project = self.context.project
        return frozenset(v for v in values if not excluded.intersection(project.ancestors(_class_of(v)) if _class_of(v) else ()))

    def guard_never_holds(self, call: cst.Call) -> bool:
        """Whether an `if` around `call` can never let it run because a `self` flag it needs
        is off in every instance of the class: the mm* `if self.with_cp and x.requires_grad:`
        (or the `else` of `if not self.use_checkpoint:`) in a block whose constructor defaults
        `with_cp` to False and that the project builds only with it off, at least once said
        so (`SpatialPrior(dim, with_cp=False)`; `Denotation.flag_off_everywhere`). A flag set
        to a value the model cannot tell, or passed on from another constructor's parameter,
        may be on."""
        line = self.context.position(call).start.line
        for guard in self._call_guards.get(call, ()):
            body = self.context.position(guard.body)
            if body.start.line <= line <= body.end.line:
                needed = [part for part in _conjuncts(guard.test) if _self_attribute(part)]
            elif isinstance(guard.test, cst.UnaryOperation) and isinstance(guard.test.operator, cst.Not):
                needed = [guard.test.expression] if _self_attribute(guard.test.expression) else []
            else:
                needed = []
            owner = self._owner(self._call_scopes.get(call, ()))
            denotation = self.context.project.denotation
            if owner is not None and any(denotation.flag_off_everywhere(owner, flag.attr.value) for flag in needed):
                return True
        return False

    def values_at(self, call: cst.Call, expr: cst.BaseExpression, assume: Arguments = ()) -> tuple[str | None, frozenset]:
        """The class holding `call` (if any) and what `expr`, written at `call`, may denote
        (names as bound on the lines before the call: a loop variable as its loop binds it);
        `assume`: constructor arguments its instance is taken to be built with."""
        scopes = self._call_scopes.get(call, ())
        owner = self._owner(scopes)
        frame = replace(self._frame(scopes, owner, assume), before=self.context.position(call).start.line + 1)
        evaluated = read(expr)
        clauses = tuple(clause for c in self._call_comprehensions.get(call, ()) for clause in comprehension_clauses(c))
        if clauses and _names_in(evaluated) & {name for target, _ in clauses for name in _names_in(target)}:
            # A comprehension's target, as its clauses bind it: the elements `expr` takes there.
            values = self.context.project.denotation.evaluate(("comp", evaluated, clauses), frame)
            return owner, frozenset(e for v in values if isinstance(v, Sequence) for e in v.elements)
        return owner, self.context.project.denotation.evaluate(evaluated, frame)

    def runs_project_method(self, call: cst.Call) -> bool:
        """Whether `<receiver>.<method>(...)` runs a method the project writes: every value
        of the receiver is an instance of a project class that defines the method or inherits
        it from a project class (a wrapper's own `gradient_checkpointing_enable(self)` that
        hands on to its Hugging Face model's)."""
        if not isinstance(call.func, cst.Attribute):
            return False
        _, values = self.values_at(call, call.func.value)
        project = self.context.project
        return bool(values) and all(
            isinstance(value, Instance) and project.class_method_in(value.cls, call.func.attr.value) is not None
            for value in values
        )

    def recomputes_tensors_only(self, site: CheckpointSite) -> bool:
        """Whether the site checkpoints a project function of its tensor inputs alone (the
        entropy of logits after the model's forward): no module is handed to it, and neither
        it nor the project functions it calls run a module or a callable they are given, so
        no FSDP hook runs in its recomputation and no parameter is read there."""
        if site.function is None:
            return False
        denotation = self.context.project.denotation
        _, values = self.values_at(site.node, site.function)
        if not values or not all(isinstance(v, FunctionRef) and _plain_function(v) for v in values):
            return False
        for arg in site.positional:
            if isinstance(arg.value, (cst.Name, cst.Attribute)):
                _, passed = self.values_at(site.node, arg.value)
                if any(isinstance(v, (Instance, FunctionRef, Sequence)) for v in passed):
                    return False
        return all(_runs_no_module(denotation, v, 0) for v in values)

    def configured_reentrant(self, site: CheckpointSite) -> str | None:
        """Where `use_reentrant=<expression>` at a site is True unless the run overrides it
        (`configured_flag`), said for a message; None otherwise."""
        if site.reentrancy is not Reentrancy.UNKNOWN:
            return None
        return self.configured_flag(site, "use_reentrant", True)

    def configured_flag(self, site: CheckpointSite, name: str, wanted: bool) -> str | None:
        """Where `<name>=<expression>` at a site is `wanted` unless the run overrides it, said
        for a message: the project model's values for the expression at the call (a
        constructor parameter's default with every value the project's calls pass, an
        attribute set from it) are all `wanted`, or every declaration of the option it is
        read from (a dataclass field, an argparse default, an environment default, a YAML
        configuration) defaults to it. None otherwise (the other value somewhere, or nothing
        known). What the code itself sets decides before any declaration of the option."""
        keyword = site.keywords.get(name)
        if keyword is None:
            return None
        value = keyword.value
        code = cst.Module([]).code_for_node(value)
        option_name = value.attr.value if isinstance(value, cst.Attribute) else value.value if isinstance(value, cst.Name) else None
        owner, values = self.values_at(site.node, value)
        known = bool(values) and all(isinstance(v, Constant) for v in values)
        if known and not all(v.value is wanted for v in values):
            return None  # the code decides, whatever a configuration says
        declared = self.context.project.option_defaults(option_name) if option_name else ()
        if declared and all(option.value if wanted else option.value is False for _, option in declared):
            path, option = declared[0]
            return f"`{name}={code}`, whose default is {wanted}: {option.how} at {path}:{option.line}"
        return f"`{name}={code}`, {self._why(value, owner, wanted)}" if known else None

    def _why(self, value: cst.BaseExpression, owner: str | None, wanted: bool) -> str:
        """Where a flag the project model finds `wanted` comes from, for a message: a module
        constant (`not USE_REENTRANT`, `USE_REENTRANT = False` at settings.py:1), or the
        constructor calls that all pass it (`self.reentrant` of `Net(reentrant=True)`)."""
        negated = isinstance(value, cst.UnaryOperation) and isinstance(value.operator, cst.Not)
        inner = value.expression if negated else value
        if isinstance(inner, cst.Name):
            constant = self._module_constant(inner)
            if constant is not None:
                path, line, literal = constant
                return f"`{inner.value} = {literal}` at {path}:{line}"
        if isinstance(inner, cst.Attribute) and isinstance(inner.value, cst.Name) and inner.value.value == "self" and owner:
            sites = [
                f"{path}:{line}" for parameter, path, line in self.context.project.denotation.every_call_sites(f"{owner}.__init__")
                if parameter == inner.attr.value
            ]
            if sites:
                more = f" and {len(sites) - 1} more" if len(sites) > 1 else ""
                return (
                    f"{wanted}: every `{owner.rsplit('.', 1)[-1]}` the project builds is given `{inner.attr.value}` "
                    f"{wanted} ({sites[0]}{more})"
                )
        return f"{wanted} by default and wherever the project sets it"

    def _module_constant(self, name: cst.Name) -> tuple[str, int, str] | None:
        """(path, line, literal) of the one module-level `NAME = True / False` a name refers to."""
        project = self.context.project
        absolute = absolute_names(self.context, name)
        if len(absolute) != 1:
            return None
        module, _, variable = next(iter(absolute)).rpartition(".")
        summary = project.denotation.summary(f"{module}.<module>")
        bindings = [b for b in summary.bindings if b.pattern == ("name", variable)] if summary is not None else []
        path = project.module_paths.get(module)
        if path is None or len(bindings) != 1 or bindings[0].value[0] != "const":
            return None
        return path, bindings[0].line, repr(bindings[0].value[1])

    def configured_impl(self, call: cst.Call, value: cst.BaseExpression) -> str | None:
        """Where `checkpoint_impl=<expression>` at a `checkpoint_wrapper` call (or a partial
        of it) is `CheckpointImpl.REENTRANT` unless the run overrides it, said for a message:
        the project model's values for the expression there (a conditional over a parameter
        defaulting to True that no call sets to False) are all the reentrant one. None
        otherwise."""
        _, values = self.values_at(call, value)
        if values and all(isinstance(v, ClassRef) and v.name == CHECKPOINT_IMPL_REENTRANT for v in values):
            code = cst.Module([]).code_for_node(value)
            return f"`checkpoint_impl={code}`: reentrant by default and wherever the project sets it"
        return None

    def _own_method(self, call: cst.Call) -> set[str]:
        """`self.method(...)` in a method: the method of its class (or of a project base)."""
        func = call.func
        owner = self._owner(self._call_scopes.get(call, ()))
        if owner is None or not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"):
            return set()
        found = self.context.project.denotation.method(owner, func.attr.value)
        return {found.name} if found is not None else set()

    def _owner(self, scopes: tuple[tuple[str, str], ...]) -> str | None:
        """The class whose method (or a function nested in it) holds the call."""
        names = [name for _, name in scopes]
        for index in range(len(scopes) - 1, -1, -1):
            if scopes[index][0] == "class" and index + 1 < len(scopes):
                return ".".join([self._module, *names[: index + 1]])
        return None

    def _frame(self, scopes: tuple[tuple[str, str], ...], owner: str | None, assume: Arguments = ()):
        denotation = self.context.project.denotation
        instance = denotation.instance(owner) if owner is not None else None
        if instance is not None and assume:
            instance = replace(instance, arguments=assume)
        if not scopes or scopes[-1][0] != "function":
            return denotation.frame_of(f"{self._module}.<module>", self._module)
        function = ".".join([self._module, *(name for _, name in scopes)])
        frame = denotation.frame_of(function, self._module, instance)
        if self.context.project.checkpointed_parameter(function) is not None:
            # A checkpoint_seq-style helper: its call sites are reported, each with what it passes.
            frame = replace(frame, entry=False)
        return frame


def class_refs(value) -> list[ClassRef]:
    """A class, or the classes of a tuple of them."""
    elements = value.elements if isinstance(value, Sequence) else (value,)
    return [e for e in elements if isinstance(e, ClassRef)]


def _class_of(value) -> str | None:
    """The class of a module value: an instance's, or the class standing for one."""
    return value.cls if isinstance(value, Instance) else value.name if isinstance(value, ClassRef) else None


def _conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The parts of an `and` chain (the test itself otherwise)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return [*_conjuncts(test.left), *_conjuncts(test.right)]
    return [test]


def _self_attribute(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"


def _plain_function(function: FunctionRef) -> bool:
    """A function with nothing bound: no `self`, no partial's arguments."""
    return (function.frame is None or function.frame.self_instance is None) and not function.bound and not function.positional


# How deep `recomputes_tensors_only` follows the project functions a region calls.
_TENSOR_FUNCTION_DEPTH = 3


def _runs_no_module(denotation, function: FunctionRef, depth: int) -> bool:
    """A project function that calls only torch's (and math's, numpy's, einops') functions,
    tensor methods, builtins and project functions of the same kind: no module, no class,
    nothing it is handed."""
    summary = denotation.summary(function.name)
    if summary is None or depth > _TENSOR_FUNCTION_DEPTH or summary.self_name is not None:
        return False
    if denotation.summary(function.name.rpartition(".")[0]) is not None:
        return False  # a nested function (timm's `run_function(start, end, functions)`) runs what it closes over
    frame = denotation.frame_for(function, summary)
    names = dict(denotation.index.files[denotation.index.path_of(function.name)].names) if denotation.index.path_of(function.name) else {}
    for callee, line in summary.calls:
        absolute = dotted_absolute(callee, names) or ""
        if absolute.startswith(TENSOR_LIBRARIES) and not absolute.rsplit(".", 1)[-1][:1].isupper():
            continue  # `torch.logsumexp`, `F.softmax` (not `torch.nn.Linear`)
        if callee[0] == "attr" and callee[2] in TENSOR_METHODS and not absolute:
            continue  # `(probabilities * logits).sum(-1)`
        if callee[0] == "name" and callee[1] in TENSOR_BUILTINS and callee[1] not in names:
            continue
        values = denotation.evaluate(callee, replace(frame, before=line + 1))
        if not values or not all(
            isinstance(value, FunctionRef) and _plain_function(value) and _runs_no_module(denotation, value, depth + 1)
            for value in values
        ):
            return False
    return True


def _names_in(expr) -> set[str]:
    """The plain names a summary expression (or pattern) reads."""
    if not isinstance(expr, tuple) or not expr:
        return set()
    if expr[0] == "name" and len(expr) == 2 and isinstance(expr[1], str):
        return {expr[1]}
    return {name for part in expr[1:] for name in _names_in(part)}
