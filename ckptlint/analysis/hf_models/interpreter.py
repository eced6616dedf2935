"""The interpreter: each context of a file run once, statement by statement, in source order."""

from __future__ import annotations

from collections.abc import Sequence

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.hf_models.calls import Calls
from ckptlint.analysis.hf_models.objects import (
    ConfigValue, DictValue, ModelObject, ModelPart, Scope, ScriptValue, TrainingArgumentsValue, TrainingContext,
    TupleValue, bound_models, dict_expression, merge_branch_models, same_value,
)
from ckptlint.analysis.branches import Conditions, condition_literals, contradicts, literal_truth
from ckptlint.analysis.cst_walk import child_nodes, walk_batched
from ckptlint.analysis.hf_models.steps import ModelHistory, ScriptModels, StepKind
from ckptlint.analysis.huggingface import GC_KWARGS, HfCheckpointingKwargs
from ckptlint.analysis.hf_models.syntax import (
    body_of, code_of, dict_keys, dotted_text, is_false, is_true, literal_value, subscript_key,
)
from ckptlint.model.library import classify_model_class
from ckptlint.model.values import Constant, Frame, Mapping
from ckptlint.analysis.hf_models.local_functions import FileDefinitions, close_over_callees
from ckptlint.model.names import TEST_SETUP_METHODS, is_test_class, is_test_function, module_name
from ckptlint.rule import FileContext


class Interpreter(Calls):
    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.module = context.module
        # Steps name the nodes of the file's `ast` tree: found from libcst's here.
        self.bridge = context._bridge()
        self.order = 0
        # The call a statement unpacks into this many names (`policy, ref = load(name)`).
        self.unpacked: tuple[cst.BaseExpression, int] | None = None
        self.objects: list[ModelObject] = []
        self.called: set[cst.FunctionDef] = set()
        self.ran: set[cst.FunctionDef] = set()
        self._project_modules: frozenset[str] | None = None
        self.module_names: dict[str, ScriptValue] = {}
        self._names: dict[cst.CSTNode, set[str]] = {}
        self.module_name = module_name(context.relative_path)
        self._imported_dicts: dict[str, DictValue | None] = {}
        definitions = context.file_definitions
        if definitions is None:  # not collected by the traversal: walked here
            definitions = FileDefinitions(self.module_name)
            walk_batched(context.wrapper, [definitions])
        self.functions = definitions.functions
        self.classes = definitions.classes
        self.class_of_function = definitions.class_of_function
        self.main_input_names = definitions.main_input_names
        self.function_facts = definitions.function_facts
        self.project_names = definitions.project_names
        self.imported_names = definitions.imported_names
        self.insertable = definitions.insertable
        self._resolve_local_calls(definitions.calls)

    # --- definitions -------------------------------------------------------------------

    def _resolve_local_calls(self, calls: list[tuple[cst.Call, str | None, tuple[cst.FunctionDef, ...]]]) -> None:
        """Calls resolved once every definition is known, and only those that may name one."""
        defined = {name.rsplit(".", 1)[-1] for name in self.functions}
        for call, self_class, callers in calls:
            short = call.func.value if isinstance(call.func, cst.Name) else call.func.attr.value
            target = self._local_function(call, self_class) if short in defined else None
            if target is not None:
                self.called.add(target)
                for caller in callers:
                    self.function_facts[caller].callees.add(target)
        close_over_callees(self.function_facts)

    def _local_function(self, call: cst.Call, class_name: str | None) -> cst.FunctionDef | None:
        """The function or method of this file a call runs, when it is known: `helper(...)`,
        `self.method(...)`, `Helpers.static_method(...)`."""
        func = call.func
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            return self.functions.get(f"{class_name}.{func.attr.value}") if class_name else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in self.classes:
            return self.functions.get(f"{func.value.value}.{func.attr.value}")
        if not isinstance(func, cst.Name):
            return None
        names = self.context.qualified_names(func)
        if len(names) != 1:
            return None
        (qualified,) = names
        if qualified.source is not cst.metadata.QualifiedNameSource.LOCAL:
            return None
        return self.functions.get(qualified.name)

    # --- contexts ----------------------------------------------------------------------

    def _run_tests(self, class_name: str, methods: list[cst.FunctionDef]) -> list[cst.FunctionDef]:
        """Each test method of a test class is a context of its own, after the class's set-up
        (pytest and unittest run them one by one): a backward in one test trains nothing of
        another. The methods left to run as one context."""
        setup = [m for m in methods if m.name.value in TEST_SETUP_METHODS]
        tests = [m for m in methods if is_test_function(m.name.value)]
        for test in tests:
            if test in self.called:
                continue
            context, shared = TrainingContext(), {}
            for method in (*setup, test):
                frame = Scope(context, shared, class_name, module_names=self.module_names)
                if self._may_matter(method, frame, []):
                    self._run_function(method, frame, [], {})
        return [m for m in methods if m not in tests and m not in setup]

    def run(self) -> ScriptModels:
        module_frame = Scope(TrainingContext())
        self.module_names = module_frame.locals
        self._run_block(self.module.body, module_frame)
        for class_name, node in self.classes.items():
            methods = [s for s in body_of(node) if isinstance(s, cst.FunctionDef)]
            if is_test_class(class_name, [code_of(base.value) for base in node.bases]):
                methods = self._run_tests(class_name, methods)
            if not methods:
                continue
            context = TrainingContext()
            shared: dict[str, ScriptValue] = {}
            lightning = any("LightningModule" in code_of(base.value) for base in node.bases)
            for method in sorted(methods, key=lambda m: m.name.value != "__init__"):
                if lightning and method.name.value == "training_step":  # Lightning runs the loop
                    context.start_training(self.order)
                if method not in self.called:
                    frame = Scope(context, shared, class_name, module_names=self.module_names)
                    if self._may_matter(method, frame, []):
                        self._run_function(method, frame, [], {})
        for function in self.functions.values():
            if function not in self.called and function not in self.class_of_function:
                self._run_entry(function)
        # Helpers reached only from code that never runs here (a nested function's caller).
        for function in self.functions.values():
            if function not in self.ran and function not in self.class_of_function:
                self._run_entry(function)
        histories = tuple(
            ModelHistory(
                obj.model_class, obj.quantized, tuple(obj.steps), obj.context.training_starts, obj.remote_code, obj.checkpoint
            )
            for obj in self.objects
            if obj.steps
        )
        return ScriptModels(histories)

    def _run_entry(self, function: cst.FunctionDef) -> None:
        frame = Scope(TrainingContext(), module_names=self.module_names)
        passed = self._passed_models(function, frame) if self.function_facts[function].enables else {}
        if passed or self._may_matter(function, frame, []):
            self._run_function(function, frame, [], passed)

    def _passed_models(self, function: cst.FunctionDef, frame: Scope) -> dict[str, ScriptValue]:
        """For a function nothing in this file calls that turns checkpointing on
        (`def enable_gc(model): model.gradient_checkpointing_enable()`): the models the
        project's other modules pass it, by parameter, where they all are of one class; what
        was done to every one of them on its way (cache off, input grads, adapters) is done
        to the parameter's model when the function starts."""
        found: dict[str, ScriptValue] = {}
        for param in [*function.params.posonly_params, *function.params.params, *function.params.kwonly_params]:
            passed = self.context.project.passed_models(self.project_names[function], param.name.value)
            classes = {origin.model_class for origin, _ in passed}
            if len(classes) != 1:
                continue
            origin = passed[0][0]
            obj = ModelObject(classify_model_class(origin.model_class), origin.quantized, frame.context)
            obj.origin = origin
            self.objects.append(obj)
            found[param.name.value] = part = ModelPart(obj)
            for kind, done in ((StepKind.USE_CACHE_OFF, "cache_off"), (StepKind.INPUT_GRADS, "input_grads"),
                               (StepKind.PEFT_WRAPPED, "peft")):
                if all(getattr(passed_origin, done) for passed_origin, _ in passed):
                    self._step(part, kind, function, frame)
        return found

    def _run_function(
        self,
        function: cst.FunctionDef,
        frame: Scope,
        args: list[ScriptValue],
        kwargs: dict[str, ScriptValue],
        known: Conditions = (),
    ) -> None:
        """Run `function` in `frame` with its parameters bound; `known`: the truth of those
        the call decides (`parameter_truths`)."""
        self.ran.add(function)
        params = self._called_parameters(function)
        for param, value in zip(params, args):
            frame.bind(param.name.value, value)
        for param in [*params, *function.params.kwonly_params]:
            if param.name.value in kwargs:
                frame.bind(param.name.value, kwargs[param.name.value])
        frame.known = known
        frame.stack = (*frame.stack, function)
        self._run_block(body_of(function), frame)

    def _called_parameters(self, function: cst.FunctionDef) -> list[cst.Param]:
        """The positional parameters a call fills (a method's `self` / `cls` is not one)."""
        params = [*function.params.posonly_params, *function.params.params]
        if function in self.class_of_function and params and params[0].name.value in ("self", "cls"):
            params = params[1:]
        return params

    def parameter_truths(self, call: cst.Call, function: cst.FunctionDef, caller: Scope) -> Conditions:
        """The truth of `function`'s parameters at `call`, where it is known: a literal passed
        (or a name the caller knows the truth of), or the literal default of a parameter the
        call leaves. Nothing with `*args` / `**kwargs`, which may pass anything."""
        if any(arg.star for arg in call.args):
            return ()
        params = self._called_parameters(function)
        positional = [arg.value for arg in call.args if arg.keyword is None]
        keywords = {arg.keyword.value: arg.value for arg in call.args if arg.keyword is not None}
        found: list[tuple[str, bool]] = []
        for index, param in enumerate([*params, *function.params.kwonly_params]):
            name = param.name.value
            if index < len(params) and index < len(positional):
                value = positional[index]
            else:
                value = keywords.get(name, param.default)
            truth = literal_truth(value, caller.known) if value is not None else None
            if truth is not None:
                found.append((name, truth))
        return tuple(found)

    # --- statements --------------------------------------------------------------------

    def _run_block(self, body: Sequence[cst.CSTNode], frame: Scope) -> None:
        for statement in body:
            self._run_statement(statement, frame)

    def _run_statement(self, statement: cst.CSTNode, frame: Scope) -> None:
        if isinstance(statement, cst.SimpleStatementLine):
            frame.statement = statement if statement in self.insertable else None
            for small in statement.body:
                self._run_small(small, frame)
            frame.statement = None
        elif isinstance(statement, cst.SimpleStatementSuite):
            frame.statement = None
            for small in statement.body:
                self._run_small(small, frame)
        elif isinstance(statement, cst.BaseSmallStatement):  # the body of `if x: y()`
            frame.statement = None
            self._run_small(statement, frame)
        elif isinstance(statement, cst.If):
            self._eval(statement.test, frame)
            taken, not_taken = condition_literals(statement.test, True), condition_literals(statement.test, False)
            truth = literal_truth(statement.test, frame.known)  # `if False:`, `if not debug:`
            before = bound_models(frame)
            first: dict = {}
            if truth is not False and not contradicts(frame.known, taken):
                self._run_branch(statement.body, frame, (id(statement), 0), taken)
                first = bound_models(frame)
            if statement.orelse is not None and truth is not True and not contradicts(frame.known, not_taken):
                orelse = statement.orelse
                self._run_branch(orelse if isinstance(orelse, cst.If) else orelse.body, frame, (id(statement), 1), not_taken)
                merge_branch_models(before, first, bound_models(frame))
        elif isinstance(statement, (cst.For, cst.While)):
            if isinstance(statement, cst.For):
                iterated = self._eval(statement.iter, frame)
                self._bind_target(statement.target, iterated.child("[]") if isinstance(iterated, ModelPart) else None, frame)
            else:
                self._eval(statement.test, frame)
            self._run_block(body_of(statement), frame)
            if statement.orelse is not None:
                self._run_block(body_of(statement.orelse), frame)
        elif isinstance(statement, cst.With):
            for item in statement.items:
                value = self._eval(item.item, frame)
                if item.asname is not None:
                    self._bind_target(item.asname.name, value, frame)
            self._run_block(body_of(statement), frame)
        elif isinstance(statement, cst.Try) or type(statement).__name__ == "TryStar":
            self._run_block(body_of(statement), frame)
            for handler in statement.handlers:
                self._run_block(body_of(handler), frame)
            for extra in (statement.orelse, statement.finalbody):
                if extra is not None:
                    self._run_block(body_of(extra), frame)
        elif isinstance(statement, cst.Match):
            self._eval(statement.subject, frame)
            for index, case in enumerate(statement.cases):
                self._run_branch(case.body, frame, (id(statement), index), ())
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return  # run when called (or as a context of its own)

    def _run_branch(self, body: cst.CSTNode, frame: Scope, branch: tuple[int, int], conditions: Conditions) -> None:
        outer_branches, outer_conditions = frame.branches, frame.conditions
        frame.branches = (*outer_branches, branch)
        frame.conditions = (*outer_conditions, *conditions)
        if isinstance(body, cst.If):
            self._run_statement(body, frame)
        else:
            self._run_block(body_of(body), frame)
        frame.branches, frame.conditions = outer_branches, outer_conditions

    def _run_small(self, small: cst.BaseSmallStatement, frame: Scope) -> None:
        if isinstance(small, cst.Assign):
            target = small.targets[0].target
            if len(small.targets) == 1 and isinstance(target, (cst.Tuple, cst.List)) and not any(
                isinstance(e, cst.StarredElement) for e in target.elements
            ):
                self.unpacked = (small.value, len(target.elements))
            value = self._eval(small.value, frame)
            self.unpacked = None
            for target in small.targets:
                self._assign(target.target, value, small.value, small, frame)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self._assign(small.target, self._eval(small.value, frame), small.value, small, frame)
        elif isinstance(small, cst.AugAssign):
            self._eval(small.value, frame)
            if isinstance(small.target, cst.Name):  # `flag |= other`: its truth is no longer known
                frame.known = tuple((atom, truth) for atom, truth in frame.known if atom != small.target.value)
        elif isinstance(small, cst.Return):
            if small.value is not None:
                frame.returns.append(self._eval(small.value, frame))
        elif isinstance(small, cst.Expr):
            self._eval(small.value, frame)
        else:
            self._eval_children(small, frame)

    def _assign(
        self,
        target: cst.BaseExpression,
        value: ScriptValue,
        value_node: cst.BaseExpression,
        node: cst.CSTNode,
        frame: Scope,
    ) -> None:
        if isinstance(target, cst.Attribute):
            owner = self._eval(target.value, frame)
            name = target.attr.value
            if isinstance(owner, ModelPart):
                self._assign_model_attribute(owner, name, value_node, node, frame)
                return
            if isinstance(owner, ConfigValue):
                if name == "use_cache":
                    self._config_use_cache(owner, value_node, node, frame)
                return
            if isinstance(owner, TrainingArgumentsValue):
                if name == "gradient_checkpointing":
                    owner.enables = literal_value(value_node)
                elif name == GC_KWARGS:
                    owner.kwargs = HfCheckpointingKwargs.of(dict_expression(value_node, frame), trainer_path=True)
                return
        if isinstance(target, cst.Subscript):
            owner = self._eval(target.value, frame)
            if isinstance(owner, DictValue):
                key = subscript_key(target)
                owner.expression = None
                if owner.keys is not None and key is not None:
                    owner.keys[key] = value_node
                else:
                    owner.keys = None
            return
        self._bind_target(target, value, frame)

    def _bind_target(self, target: cst.BaseExpression, value: ScriptValue, frame: Scope) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            if isinstance(value, ModelPart) and value.path[-2:] == ("named_parameters()", "[]") and len(target.elements) == 2:
                # `for name, param in part.named_parameters()`: `param` is one of `part.parameters()`
                parameters = ModelPart(value.model, value.path[:-2] + ("parameters()", "[]"))
                self._bind_target(target.elements[1].value, parameters, frame)
                return
            items = value.items if isinstance(value, TupleValue) else ()
            elements = [e for e in target.elements if not isinstance(e, cst.StarredElement)]
            exact = len(elements) == len(target.elements) and len(items) == len(elements)
            for index, element in enumerate(elements):
                self._bind_target(element.value, items[index] if exact else None, frame)
            return
        name = dotted_text(target)
        if name is not None:
            frame.bind(name, value)

    def _assign_model_attribute(self, part: ModelPart, name: str, value: cst.BaseExpression, node: cst.CSTNode, frame: Scope) -> None:
        if name == "use_cache" and "generation_config" not in part.path:
            if not is_true(value):
                self._step(part, StepKind.USE_CACHE_OFF, node, frame)
        elif name == "requires_grad" and part.path[-2:] == ("parameters()", "[]"):
            # `for p in model.layers[-1].parameters(): p.requires_grad = True`
            self._requires_grad(ModelPart(part.model, part.path[:-2]), not is_false(value), node, frame)
        elif name == "requires_grad" and part.is_embedding and not is_false(value):
            self._step(part, StepKind.INPUT_GRADS, node, frame)

    def _config_use_cache(
        self, config: ConfigValue, value: cst.BaseExpression | None, node: cst.CSTNode, frame: Scope
    ) -> None:
        """`config.use_cache = value` (None: a value not known here)."""
        if value is not None and is_true(value):
            return
        if config.use_cache_off is not True:
            config.use_cache_off = True if value is not None else None
        for model in config.models:
            self._step(ModelPart(model), StepKind.USE_CACHE_OFF, node, frame)

    # --- expressions -------------------------------------------------------------------

    def _eval(self, expr: cst.BaseExpression, frame: Scope) -> ScriptValue:
        if isinstance(expr, cst.Name):
            found = frame.lookup(expr.value)
            if found is None and expr.value in self.imported_names and expr.value not in frame.locals:
                found = self._imported_dict(expr)
            return found
        if isinstance(expr, cst.Attribute):
            name = dotted_text(expr)
            if name is not None:
                found = frame.lookup(name)
                if found is not None:
                    return found
            owner = self._eval(expr.value, frame)
            return owner.child(expr.attr.value) if isinstance(owner, ModelPart) else None
        if isinstance(expr, cst.Call):
            return self._call(expr, frame)
        if isinstance(expr, (cst.Tuple, cst.List)):
            items = tuple(self._eval(e.value, frame) for e in expr.elements)
            return TupleValue(items) if isinstance(expr, cst.Tuple) else None
        if isinstance(expr, cst.Dict):
            self._eval_children(expr, frame)
            return DictValue(expr, dict_keys(expr))
        if isinstance(expr, cst.IfExp):
            self._eval(expr.test, frame)
            # An arm the known values rule out is not run (`model(**b, use_cache=False) if
            # per_call else model(**b)` with `per_call` False).
            truth = literal_truth(expr.test, frame.known)
            if truth is False or contradicts(frame.known, condition_literals(expr.test, True)):
                return self._eval(expr.orelse, frame)
            if truth is True or contradicts(frame.known, condition_literals(expr.test, False)):
                return self._eval(expr.body, frame)
            body, orelse = self._eval(expr.body, frame), self._eval(expr.orelse, frame)
            return body if same_value(body, orelse) else None
        if isinstance(expr, cst.Subscript):
            owner = self._eval(expr.value, frame)
            for element in expr.slice:
                self._eval_children(element, frame)
            return owner.child("[]") if isinstance(owner, ModelPart) else None
        if isinstance(expr, cst.NamedExpr):
            value = self._eval(expr.value, frame)
            self._bind_target(expr.target, value, frame)
            return value
        if isinstance(expr, cst.Lambda):
            return None  # runs later, if ever
        self._eval_children(expr, frame)
        return None

    def _imported_dict(self, name: cst.Name) -> DictValue | None:
        """A dict constant imported from another module of the project (`from config import
        GC_KWARGS`), as the project model evaluates it, when it names `use_reentrant` (a
        dict without it may have entries the model does not see: `**other`, computed keys).
        Bound among the module's names, as the import binds it."""
        qualified = self.context.qualified_names(name)
        if len(qualified) != 1:
            return None
        (only,) = qualified
        if only.source is not cst.metadata.QualifiedNameSource.IMPORT or not self._is_project_name(only.name):
            return None
        if name.value not in self._imported_dicts:
            frame = Frame(None, self.module_name)
            self._imported_dicts[name.value] = imported_kwargs_dict(
                self.context.project.denotation.evaluate(("name", name.value), frame)
            )
        value = self._imported_dicts[name.value]
        if value is not None:
            self.module_names[name.value] = value
        return value

    def _eval_children(self, node: cst.CSTNode, frame: Scope) -> None:
        for child in child_nodes(node):
            if isinstance(child, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(child, cst.BaseExpression):
                self._eval(child, frame)
            else:
                self._eval_children(child, frame)

    # --- calls -------------------------------------------------------------------------


def imported_kwargs_dict(values: frozenset) -> DictValue | None:
    """The dict a project constant denotes, rebuilt as a literal, when it is one dict with
    string keys among them `use_reentrant`; entries whose value is not one literal are
    written as a name (not known)."""
    if len(values) != 1:
        return None
    (mapping,) = values
    if not isinstance(mapping, Mapping) or not all(isinstance(key, str) for key, _ in mapping.entries):
        return None
    if "use_reentrant" not in {key for key, _ in mapping.entries}:
        return None
    elements = []
    for key, entry in mapping.entries:
        (literal,) = entry if len(entry) == 1 else (None,)
        value = (
            cst.parse_expression(repr(literal.value))
            if isinstance(literal, Constant) and isinstance(literal.value, (bool, int, float, str, type(None)))
            else cst.Name("not_known_here")
        )
        elements.append(cst.DictElement(cst.SimpleString(repr(key)), value))
    expression = cst.Dict(elements)
    return DictValue(expression, dict_keys(expression))
