"""The interpreter: each context of a file run once, statement by statement, in source order."""

from __future__ import annotations

import ast
from collections.abc import Sequence

from ckptlint.model.form.branching import Conditions, contradicts
from ckptlint.model.library.transformers import GC_KWARGS, HfCheckpointingKwargs
from ckptlint.model.syntax.ast_walk import child_nodes
from ckptlint.model.library.transformers import classify_model_class
from ckptlint.model.syntax.names import TEST_SETUP_METHODS, is_test_class, is_test_function, module_name
from ckptlint.model.script_models.calls import Calls
from ckptlint.model.script_models.definitions import FileDefinitions, FunctionNode, close_over_callees
from ckptlint.model.script_models.names import ScriptNames
from ckptlint.model.script_models.objects import (
    ConfigValue, DictValue, ModelObject, ModelPart, Scope, ScriptValue, TrainingArgumentsValue, TrainingContext,
    TupleValue, bound_models, dict_expression, merge_branch_models, same_value,
)
from ckptlint.model.script_models.steps import ModelHistory, ScriptModels, StepKind
from ckptlint.model.script_models.syntax import (
    FUNCTION_DEFINITIONS, SourceText, arguments_of, condition_literals, dict_keys, dotted_text, is_false, is_true,
    literal_truth, literal_value, subscript_key,
)
from ckptlint.model.form.values import Constant, Frame, Mapping

_TRY = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
_NOT_RUN_HERE = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class Interpreter(Calls):
    def __init__(self, tree: ast.Module, text: str, relative_path: str, project, names: ScriptNames) -> None:
        self.tree = tree
        self.source = SourceText(text)
        self.relative_path = relative_path
        self.project = project
        self.names = names
        self.order = 0
        # The call a statement unpacks into this many names (`policy, ref = load(name)`).
        self.unpacked: tuple[ast.expr, int] | None = None
        self.objects: list[ModelObject] = []
        self.called: set[FunctionNode] = set()
        self.ran: set[FunctionNode] = set()
        self.module_names: dict[str, ScriptValue] = {}
        self._names: dict[ast.expr, set[str]] = {}
        self.module_name = module_name(relative_path)
        self._imported_dicts: dict[str, DictValue | None] = {}
        definitions = FileDefinitions(self.module_name, tree)
        self.functions = definitions.functions
        self.classes = definitions.classes
        self.class_of_function = definitions.class_of_function
        self.main_input_names = definitions.main_input_names
        self.function_facts = definitions.function_facts
        self.project_names = definitions.project_names
        self.imported_names = definitions.imported_names
        self._resolve_local_calls(definitions.calls)

    # --- definitions -------------------------------------------------------------------

    def _resolve_local_calls(self, calls: list[tuple[ast.Call, str | None, tuple[FunctionNode, ...]]]) -> None:
        """Calls resolved once every definition is known, and only those that may name one."""
        defined = {name.rsplit(".", 1)[-1] for name in self.functions}
        for call, self_class, callers in calls:
            short = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
            target = self._local_function(call, self_class) if short in defined else None
            if target is not None:
                self.called.add(target)
                for caller in callers:
                    self.function_facts[caller].callees.add(target)
        close_over_callees(self.function_facts)

    def _local_function(self, call: ast.Call, class_name: str | None) -> FunctionNode | None:
        """The function or method of this file a call runs, when it is known: `helper(...)`,
        `self.method(...)`, `Helpers.static_method(...)`."""
        func = call.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
            return self.functions.get(f"{class_name}.{func.attr}") if class_name else None
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in self.classes:
            return self.functions.get(f"{func.value.id}.{func.attr}")
        if not isinstance(func, ast.Name):
            return None
        names = self.names.qualified(func)
        if len(names) != 1:
            return None
        (qualified,) = names
        if qualified.source != "local":
            return None
        return self.functions.get(qualified.name)

    # --- contexts ----------------------------------------------------------------------

    def _run_tests(self, class_name: str, methods: list[FunctionNode]) -> list[FunctionNode]:
        """Each test method of a test class is a context of its own, after the class's set-up
        (pytest and unittest run them one by one): a backward in one test trains nothing of
        another. The methods left to run as one context."""
        setup = [m for m in methods if m.name in TEST_SETUP_METHODS]
        tests = [m for m in methods if is_test_function(m.name)]
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
        self._run_block(self.tree.body, module_frame)
        for class_name, node in self.classes.items():
            methods = [s for s in node.body if isinstance(s, FUNCTION_DEFINITIONS)]
            if is_test_class(class_name, [self.source.of(base) for base in node.bases]):
                methods = self._run_tests(class_name, methods)
            if not methods:
                continue
            context = TrainingContext()
            shared: dict[str, ScriptValue] = {}
            lightning = any("LightningModule" in self.source.of(base) for base in node.bases)
            for method in sorted(methods, key=lambda m: m.name != "__init__"):
                if lightning and method.name == "training_step":  # Lightning runs the loop
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

    def _run_entry(self, function: FunctionNode) -> None:
        frame = Scope(TrainingContext(), module_names=self.module_names)
        passed = self._passed_models(function, frame) if self.function_facts[function].enables else {}
        if passed or self._may_matter(function, frame, []):
            self._run_function(function, frame, [], passed)

    def _passed_models(self, function: FunctionNode, frame: Scope) -> dict[str, ScriptValue]:
        """For a function nothing in this file calls that turns checkpointing on
        (`def enable_gc(model): model.gradient_checkpointing_enable()`): the models the
        project's other modules pass it, by parameter, where they all are of one class; what
        was done to every one of them on its way (cache off, input grads, adapters) is done
        to the parameter's model when the function starts."""
        found: dict[str, ScriptValue] = {}
        arguments = function.args
        for param in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
            passed = self.project.passed_models(self.project_names[function], param.arg)
            classes = {origin.model_class for origin, _ in passed}
            if len(classes) != 1:
                continue
            origin = passed[0][0]
            obj = ModelObject(classify_model_class(origin.model_class), origin.quantized, frame.context)
            obj.origin = origin
            self.objects.append(obj)
            found[param.arg] = part = ModelPart(obj)
            for kind, done in ((StepKind.USE_CACHE_OFF, "cache_off"), (StepKind.INPUT_GRADS, "input_grads"),
                               (StepKind.PEFT_WRAPPED, "peft")):
                if all(getattr(passed_origin, done) for passed_origin, _ in passed):
                    self._step(part, kind, function, frame)
        return found

    def _run_function(
        self,
        function: FunctionNode,
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
            frame.bind(param.arg, value)
        for param in [*params, *function.args.kwonlyargs]:
            if param.arg in kwargs:
                frame.bind(param.arg, kwargs[param.arg])
        frame.known = known
        frame.stack = (*frame.stack, function)
        self._run_block(function.body, frame)

    def _called_parameters(self, function: FunctionNode) -> list[ast.arg]:
        """The positional parameters a call fills (a method's `self` / `cls` is not one)."""
        params = [*function.args.posonlyargs, *function.args.args]
        if function in self.class_of_function and params and params[0].arg in ("self", "cls"):
            params = params[1:]
        return params

    def parameter_truths(self, call: ast.Call, function: FunctionNode, caller: Scope) -> Conditions:
        """The truth of `function`'s parameters at `call`, where it is known: a literal passed
        (or a name the caller knows the truth of), or the literal default of a parameter the
        call leaves. Nothing with `*args` / `**kwargs`, which may pass anything."""
        arguments = arguments_of(call)
        if any(arg.star for arg in arguments):
            return ()
        params = self._called_parameters(function)
        positional = [arg.value for arg in arguments if arg.keyword is None]
        keywords = {arg.keyword: arg.value for arg in arguments if arg.keyword is not None}
        defaults = _defaults(function)
        found: list[tuple[str, bool]] = []
        for index, param in enumerate([*params, *function.args.kwonlyargs]):
            name = param.arg
            if index < len(params) and index < len(positional):
                value = positional[index]
            else:
                value = keywords.get(name, defaults.get(param))
            truth = literal_truth(value, caller.known) if value is not None else None
            if truth is not None:
                found.append((name, truth))
        return tuple(found)

    # --- statements --------------------------------------------------------------------

    def _run_block(self, body: Sequence[ast.stmt], frame: Scope) -> None:
        for statement in body:
            self._run_statement(statement, frame)

    def _run_statement(self, statement: ast.stmt, frame: Scope) -> None:
        if isinstance(statement, ast.If):
            self._eval(statement.test, frame)
            taken = condition_literals(statement.test, True, self.source)
            not_taken = condition_literals(statement.test, False, self.source)
            truth = literal_truth(statement.test, frame.known)  # `if False:`, `if not debug:`
            before = bound_models(frame)
            first: dict = {}
            if truth is not False and not contradicts(frame.known, taken):
                self._run_branch(statement.body, frame, (id(statement), 0), taken)
                first = bound_models(frame)
            if statement.orelse and truth is not True and not contradicts(frame.known, not_taken):
                self._run_branch(statement.orelse, frame, (id(statement), 1), not_taken)
                merge_branch_models(before, first, bound_models(frame))
        elif isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(statement, ast.While):
                self._eval(statement.test, frame)
            else:
                iterated = self._eval(statement.iter, frame)
                self._bind_target(statement.target, iterated.child("[]") if isinstance(iterated, ModelPart) else None, frame)
            self._run_block(statement.body, frame)
            self._run_block(statement.orelse, frame)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            for item in statement.items:
                value = self._eval(item.context_expr, frame)
                if item.optional_vars is not None:
                    self._bind_target(item.optional_vars, value, frame)
            self._run_block(statement.body, frame)
        elif isinstance(statement, _TRY):
            self._run_block(statement.body, frame)
            for handler in statement.handlers:
                self._run_block(handler.body, frame)
            self._run_block(statement.orelse, frame)
            self._run_block(statement.finalbody, frame)
        elif isinstance(statement, ast.Match):
            self._eval(statement.subject, frame)
            for index, case in enumerate(statement.cases):
                self._run_branch(case.body, frame, (id(statement), index), ())
        elif isinstance(statement, _NOT_RUN_HERE):
            return  # run when called (or as a context of its own)
        else:
            frame.statement = statement
            self._run_small(statement, frame)
            frame.statement = None

    def _run_branch(self, body: list[ast.stmt], frame: Scope, branch: tuple[int, int], conditions: Conditions) -> None:
        outer_branches, outer_conditions = frame.branches, frame.conditions
        frame.branches = (*outer_branches, branch)
        frame.conditions = (*outer_conditions, *conditions)
        self._run_block(body, frame)
        frame.branches, frame.conditions = outer_branches, outer_conditions

    def _run_small(self, small: ast.stmt, frame: Scope) -> None:
        if isinstance(small, ast.Assign):
            target = small.targets[0]
            if len(small.targets) == 1 and isinstance(target, (ast.Tuple, ast.List)) and not any(
                isinstance(e, ast.Starred) for e in target.elts
            ):
                self.unpacked = (small.value, len(target.elts))
            value = self._eval(small.value, frame)
            self.unpacked = None
            for target in small.targets:
                self._assign(target, value, small.value, small, frame)
        elif isinstance(small, ast.AnnAssign):
            if small.value is not None:
                self._assign(small.target, self._eval(small.value, frame), small.value, small, frame)
        elif isinstance(small, ast.AugAssign):
            self._eval(small.value, frame)
            if isinstance(small.target, ast.Name):  # `flag |= other`: its truth is no longer known
                frame.known = tuple((atom, truth) for atom, truth in frame.known if atom != small.target.id)
        elif isinstance(small, ast.Return):
            if small.value is not None:
                frame.returns.append(self._eval(small.value, frame))
        elif isinstance(small, ast.Expr):
            self._eval(small.value, frame)
        elif isinstance(small, (ast.Delete, ast.Assert, ast.Raise)):
            self._eval_children(small, frame)

    def _assign(self, target: ast.expr, value: ScriptValue, value_node: ast.expr, node: ast.stmt, frame: Scope) -> None:
        if isinstance(target, ast.Attribute):
            owner = self._eval(target.value, frame)
            name = target.attr
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
                    owner.kwargs = HfCheckpointingKwargs.of_ast(dict_expression(value_node, frame), trainer_path=True)
                return
        if isinstance(target, ast.Subscript):
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

    def _bind_target(self, target: ast.expr, value: ScriptValue, frame: Scope) -> None:
        if isinstance(target, ast.Starred):
            target = target.value
        if isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, ModelPart) and value.path[-2:] == ("named_parameters()", "[]") and len(target.elts) == 2:
                # `for name, param in part.named_parameters()`: `param` is one of `part.parameters()`
                parameters = ModelPart(value.model, value.path[:-2] + ("parameters()", "[]"))
                self._bind_target(target.elts[1], parameters, frame)
                return
            items = value.items if isinstance(value, TupleValue) else ()
            elements = [e for e in target.elts if not isinstance(e, ast.Starred)]
            exact = len(elements) == len(target.elts) and len(items) == len(elements)
            for index, element in enumerate(elements):
                self._bind_target(element, items[index] if exact else None, frame)
            return
        name = dotted_text(target)
        if name is not None:
            frame.bind(name, value)

    def _assign_model_attribute(self, part: ModelPart, name: str, value: ast.expr, node: ast.AST, frame: Scope) -> None:
        if name == "use_cache" and "generation_config" not in part.path:
            if not is_true(value):
                self._step(part, StepKind.USE_CACHE_OFF, node, frame)
        elif name == "requires_grad" and part.path[-2:] == ("parameters()", "[]"):
            # `for p in model.layers[-1].parameters(): p.requires_grad = True`
            self._requires_grad(ModelPart(part.model, part.path[:-2]), not is_false(value), node, frame)
        elif name == "requires_grad" and part.is_embedding and not is_false(value):
            self._step(part, StepKind.INPUT_GRADS, node, frame)

    def _config_use_cache(self, config: ConfigValue, value: ast.expr | None, node: ast.AST, frame: Scope) -> None:
        """`config.use_cache = value` (None: a value not known here)."""
        if value is not None and is_true(value):
            return
        if config.use_cache_off is not True:
            config.use_cache_off = True if value is not None else None
        for model in config.models:
            self._step(ModelPart(model), StepKind.USE_CACHE_OFF, node, frame)

    # --- expressions -------------------------------------------------------------------

    def _eval(self, expr: ast.expr, frame: Scope) -> ScriptValue:
        if isinstance(expr, ast.Name):
            found = frame.lookup(expr.id)
            if found is None and expr.id in self.imported_names and expr.id not in frame.locals:
                found = self._imported_dict(expr)
            return found
        if isinstance(expr, ast.Attribute):
            name = dotted_text(expr)
            if name is not None:
                found = frame.lookup(name)
                if found is not None:
                    return found
            owner = self._eval(expr.value, frame)
            return owner.child(expr.attr) if isinstance(owner, ModelPart) else None
        if isinstance(expr, ast.Call):
            return self._call(expr, frame)
        if isinstance(expr, (ast.Tuple, ast.List)):
            items = tuple(self._eval(e.value if isinstance(e, ast.Starred) else e, frame) for e in expr.elts)
            return TupleValue(items) if isinstance(expr, ast.Tuple) else None
        if isinstance(expr, ast.Dict):
            self._eval_children(expr, frame)
            return DictValue(expr, dict_keys(expr))
        if isinstance(expr, ast.IfExp):
            self._eval(expr.test, frame)
            # An arm the known values rule out is not run (`model(**b, use_cache=False) if
            # per_call else model(**b)` with `per_call` False).
            truth = literal_truth(expr.test, frame.known)
            if truth is False or contradicts(frame.known, condition_literals(expr.test, True, self.source)):
                return self._eval(expr.orelse, frame)
            if truth is True or contradicts(frame.known, condition_literals(expr.test, False, self.source)):
                return self._eval(expr.body, frame)
            body, orelse = self._eval(expr.body, frame), self._eval(expr.orelse, frame)
            return body if same_value(body, orelse) else None
        if isinstance(expr, ast.Subscript):
            owner = self._eval(expr.value, frame)
            self._eval(expr.slice, frame)
            return owner.child("[]") if isinstance(owner, ModelPart) else None
        if isinstance(expr, ast.NamedExpr):
            value = self._eval(expr.value, frame)
            self._bind_target(expr.target, value, frame)
            return value
        if isinstance(expr, ast.Lambda):
            return None  # runs later, if ever
        self._eval_children(expr, frame)
        return None

    def _imported_dict(self, name: ast.Name) -> DictValue | None:
        """A dict constant imported from another module of the project (`from config import
        GC_KWARGS`), as the project model evaluates it, when it names `use_reentrant` (a
        dict without it may have entries the model does not see: `**other`, computed keys).
        Bound among the module's names, as the import binds it."""
        qualified = self.names.qualified(name)
        if len(qualified) != 1:
            return None
        (only,) = qualified
        if only.source != "import" or not self._is_project_name(only.name):
            return None
        if name.id not in self._imported_dicts:
            frame = Frame(None, self.module_name)
            self._imported_dicts[name.id] = imported_kwargs_dict(self.project.denotation.evaluate(("name", name.id), frame))
        value = self._imported_dicts[name.id]
        if value is not None:
            self.module_names[name.id] = value
        return value

    def _eval_children(self, node: ast.AST, frame: Scope) -> None:
        children = child_nodes(node)
        if isinstance(node, ast.Dict):  # keys and values in the order they are written
            children = [child for pair in zip(node.keys, node.values) for child in pair if child is not None]
        for child in children:
            if isinstance(child, _NOT_RUN_HERE):
                continue
            if isinstance(child, ast.expr):
                self._eval(child, frame)
            else:
                self._eval_children(child, frame)


def _defaults(function: FunctionNode) -> dict[ast.arg, ast.expr]:
    """Each parameter's default, where it has one."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    found = dict(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults))
    found.update((param, default) for param, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default is not None)
    return found


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
    keys, entries = [], []
    for key, entry in mapping.entries:
        (literal,) = entry if len(entry) == 1 else (None,)
        known = isinstance(literal, Constant) and isinstance(literal.value, (bool, int, float, str, type(None)))
        keys.append(ast.Constant(key))
        entries.append(ast.Constant(literal.value) if known else ast.Name("not_known_here", ast.Load()))
    expression = ast.Dict(keys, entries)
    return DictValue(expression, dict_keys(expression))
