"""The interpreter's calls: of the file's own functions and methods (run in place), of model
methods, of the libraries (loading, PEFT, trainers, configs), of other project modules (the
project model says what they return)."""

from __future__ import annotations

import ast

from ckptlint.model.form.branching import Conditions
from ckptlint.model.library.transformers import GC_ENABLE, GC_KWARGS, HfCheckpointingKwargs
from ckptlint.model.file_facts.extraction import CHECKPOINTING_SETTINGS
from ckptlint.model.evaluation.fates import ReturnedModel
from ckptlint.model.library.combined import (
    HF_LIBRARY_ROOTS, SAME_MODEL_FUNCTIONS, SAME_MODEL_METHODS, TRAINING_ARGUMENTS_CLASSES, WRAPPING_METHODS,
)
from ckptlint.model.library.peft import GET_PEFT_MODEL, PREPARE_FOR_KBIT, is_peft_config
from ckptlint.model.library.transformers import (
    ADAPTER_METHODS, LAYER_STACKS, TRANSFORMERS_TRAINERS, ModelClass, classify_model_class, is_model_class_name, with_checkpoint,
)
from ckptlint.model.syntax.names import module_name
from ckptlint.model.script_models.definitions import FunctionNode
from ckptlint.model.script_models.names import absolute_names
from ckptlint.model.script_models.objects import (
    ConfigValue, DictValue, ModelObject, ModelPart, ObjectOfClass, PeftConfigValue, Scope, ScriptValue,
    TrainingArgumentsValue, TupleValue, argument_value, config_at, dict_expression, gc_enable_kwargs, merge_values,
    parts_of, peft_config_at, quantized_at_load, training_arguments_of,
)
from ckptlint.model.script_models.steps import ModelStep, StepKind, TrainerKind
from ckptlint.model.script_models.syntax import (
    arguments_of, condition_literals, dict_keys, dotted_text, is_auto_peft_loader, is_config_class, is_false,
    is_peft_model_loader, is_true, keyword_value, literal_truth, literal_value, may_load_a_model, string_value,
)

MAX_INLINE_DEPTH = 8


class Calls:
    """A mixin of `Interpreter`: what a call does to the objects it is given."""

    def _call(self, call: ast.Call, frame: Scope) -> ScriptValue:
        arguments = arguments_of(call)
        func = call.func
        receiver = self._eval(func.value, frame) if isinstance(func, ast.Attribute) else None
        callee = receiver.child(func.attr) if isinstance(receiver, ModelPart) else None
        if callee is None and not isinstance(func, ast.Attribute):
            callee_value = self._eval(func, frame)
            callee = callee_value if isinstance(callee_value, ModelPart) else None
        elif callee is None and isinstance(func, ast.Attribute) and receiver is None:
            found = frame.lookup(dotted_text(func) or "")
            callee = found if isinstance(found, ModelPart) else None
        args = [self._eval(arg.value, frame) for arg in arguments]
        method = func.attr if isinstance(func, ast.Attribute) else None
        if method == "backward":
            frame.context.start_training(self.order)

        if isinstance(receiver, ModelPart) and method is not None:
            return self._model_method(call, receiver, method, args, frame)
        if isinstance(callee, ModelPart):
            self._forward_call(call, callee, args, frame)
            return None
        if isinstance(receiver, ConfigValue) and method == "update":
            keys = dict_keys(arguments[0].value) if len(arguments) == 1 and not arguments[0].keyword else None
            if keys is None or "use_cache" in keys:
                # An update whose keys are not known may turn it off too.
                self._config_use_cache(receiver, keys["use_cache"] if keys is not None else None, call, frame)
            return None
        if isinstance(receiver, DictValue) and method not in ("get", "items", "keys", "values", "copy"):
            receiver.expression, receiver.keys = None, None
            return None
        if isinstance(receiver, ObjectOfClass) and method is not None:
            found = self._method(receiver.class_name, method)
            return self._inline(call, found, args, frame, receiver) if found is not None else None
        called = self._eval(func, frame) if not isinstance(func, ast.Attribute) else frame.lookup(dotted_text(func) or "")
        if isinstance(called, ObjectOfClass):
            found = self._method(called.class_name, "forward") or self._method(called.class_name, "__call__")
            return self._inline(call, found, args, frame, called) if found is not None else None

        local = self._local_function(call, frame.class_name)
        if local is not None:
            return self._inline(call, local, args, frame)
        if isinstance(func, ast.Name) and func.id == "setattr" and len(arguments) >= 3:
            self._setattr(call, args, frame)
            return None
        if isinstance(func, ast.Name) and func.id == "dict" and not any(a.star for a in arguments):
            return DictValue(call, {a.keyword: a.value for a in arguments if a.keyword is not None})
        names = self._absolute_names(func)
        if names:
            handled, value = self._library_call(call, names, args, frame)
            if handled:
                return value
        if method in WRAPPING_METHODS and receiver is None:
            # accelerate / Fabric: `model, optimizer = accelerator.prepare(model, optimizer)`.
            return args[0] if len(args) == 1 else TupleValue(tuple(args))
        if method == "from_pretrained" and receiver is None and may_load_a_model(names):
            # `text_encoder_cls.from_pretrained(...)`: a class chosen at runtime.
            return self._new_model(None, call, frame)
        if self._is_project_call(func):
            handed_back = self._hand_to_project(call, names, args, frame)
            return handed_back if handed_back is not None else self._returned_model(call, names, frame)
        local_classes = [self._local_name(name) for name in names]
        if len(local_classes) == 1 and local_classes[0] in self.classes:
            return self._instantiate(call, local_classes[0], args, frame)
        return None

    def _local_name(self, name: str) -> str:
        """A name defined in this file, without the module prefix."""
        return name.removeprefix(module_name(self.relative_path) + ".")

    def _method(self, class_name: str, method: str, _seen: frozenset[str] = frozenset()) -> FunctionNode | None:
        """A method of a class of this file, also inherited from a base class of this file."""
        found = self.functions.get(f"{class_name}.{method}")
        if found is not None or class_name in _seen or class_name not in self.classes:
            return found
        for base in self.classes[class_name].bases:
            for name in self._absolute_names(base):
                inherited = self._method(self._local_name(name), method, _seen | {class_name})
                if inherited is not None:
                    return inherited
        return None

    def _instantiate(self, call: ast.Call, class_name: str, args: list[ScriptValue], frame: Scope) -> ObjectOfClass:
        """`Helper(model)` for a class of this file: its `__init__` runs on a new object."""
        instance = ObjectOfClass(class_name)
        init = self._method(class_name, "__init__")
        if init is not None:
            self._inline(call, init, args, frame, instance)
        return instance

    def _model_method(self, call: ast.Call, part: ModelPart, method: str, args: list[ScriptValue], frame: Scope) -> ScriptValue:
        arguments = arguments_of(call)
        subject = call.func.value if isinstance(call.func, ast.Attribute) else None
        if method == GC_ENABLE:
            kwargs = gc_enable_kwargs(call, frame)
            self._step(part, StepKind.GC_ENABLED, call, frame, subject=subject, kwargs=kwargs)
        elif method == "enable_input_require_grads":
            self._step(part, StepKind.INPUT_GRADS, call, frame)
        elif method in ADAPTER_METHODS:
            self._step(part, StepKind.ADAPTER_ADDED, call, frame)
        elif method == "requires_grad_":
            flag = arguments[0].value if arguments else None
            self._requires_grad(part, flag is None or not is_false(flag), call, frame)
        elif method in ("eval", "train") and not part.path:
            off = method == "eval" and not arguments or len(arguments) == 1 and is_false(arguments[0].value)
            self._step(part, StepKind.EVAL_MODE if off else StepKind.TRAIN_MODE, call, frame)
        elif method == "register_forward_hook" and part.is_embedding:
            if not arguments or self._hook_may_set_requires_grad(arguments[0].value):
                self._step(part, StepKind.INPUT_GRADS, call, frame)
        elif method in ("forward", "__call__", "module", "base_model", "model"):
            self._forward_call(call, part, args, frame)
        elif method == "update" and part.path and part.path[-1] == "config":
            keys = dict_keys(arguments[0].value) if len(arguments) == 1 and not arguments[0].keyword else None
            if keys is None or ("use_cache" in keys and not is_true(keys["use_cache"])):
                self._step(part, StepKind.USE_CACHE_OFF, call, frame)
        if method in SAME_MODEL_METHODS:
            return part
        if method in ("merge_and_unload", "unload"):
            return None  # the base model without its adapters: a different story
        if method == "get_input_embeddings":
            return part.child(method)
        return part.child(method + "()")

    def _cache_off_by_keyword(self, part: ModelPart, call: ast.Call, frame: Scope) -> None:
        """`use_cache=` other than a literal True (at load or in a forward call) turns the cache
        off where its value is falsy: `use_cache=not args.no_gradient_checkpointing` only where
        checkpointing is not turned on by `if not args.no_gradient_checkpointing:`, which the
        step's conditions say (a value only known at runtime is off wherever it may be)."""
        use_cache = keyword_value(call, "use_cache")
        if use_cache is not None and not is_true(use_cache):
            when = () if is_false(use_cache) else condition_literals(use_cache, False, self.source)
            self._step(part, StepKind.USE_CACHE_OFF, call, frame, when=when)

    def _requires_grad(self, part: ModelPart, trainable: bool, node: ast.AST, frame: Scope) -> None:
        """`part.requires_grad_(flag)`, or `p.requires_grad = flag` for `p` over
        `part.parameters()`: the embeddings (or the whole model) made trainable are input
        grads; the model (or a part of it) frozen, and a part of its layer stack unfrozen
        again, are what leaves a reentrant checkpoint's inputs without grad."""
        if trainable and (part.is_embedding or not part.path):
            self._step(part, StepKind.INPUT_GRADS, node, frame)
        elif not trainable and not part.is_embedding:
            self._step(part, StepKind.FROZEN, node, frame, path=part.path)
        elif trainable and any(name in LAYER_STACKS for name in part.path):
            self._step(part, StepKind.UNFROZEN, node, frame, path=part.path)

    def _forward_call(self, call: ast.Call, part: ModelPart, args: list[ScriptValue], frame: Scope) -> None:
        """A forward pass: `use_cache=False` (or a runtime value) there turns the cache off."""
        arguments = arguments_of(call)
        self._cache_off_by_keyword(part, call, frame)
        for arg, value in zip(arguments, args):
            if arg.star == "**" and isinstance(value, DictValue) and value.keys is not None and "use_cache" in value.keys:
                if not is_true(value.keys["use_cache"]):
                    self._step(part, StepKind.USE_CACHE_OFF, call, frame)

    def _setattr(self, call: ast.Call, args: list[ScriptValue], frame: Scope) -> None:
        arguments = arguments_of(call)
        owner, attribute, value = args[0], arguments[1].value, arguments[2].value
        if not (isinstance(attribute, ast.Constant) and attribute.value == "use_cache"):
            return
        if isinstance(owner, ModelPart):
            self._assign_model_attribute(owner, "use_cache", value, call, frame)
        elif isinstance(owner, ConfigValue):
            self._config_use_cache(owner, value, call, frame)

    def _hook_may_set_requires_grad(self, hook: ast.expr) -> bool:
        """A forward hook that sets `requires_grad` on the output (or one not visible here)."""
        body: ast.AST | None = hook.body if isinstance(hook, ast.Lambda) else None
        if isinstance(hook, ast.Name):
            names = self.names.qualified(hook)
            local = [self.functions.get(q.name) for q in names if q.source == "local"]
            if len(local) != 1 or local[0] is None:
                return True
            body = local[0]
        if body is None:
            return True
        return "requires_grad" in self.source.of(body)

    def _may_matter(self, function: FunctionNode, frame: Scope, args: list[ScriptValue]) -> bool:
        """Whether running `function` can change anything: it gets a value the analysis
        follows, reads one (a module name, `self.<attr>`), or it (or a function it calls)
        names something that loads, wraps, checkpoints or trains a model."""
        facts = self.function_facts[function]
        if facts.relevant or any(value is not None for value in args):
            return True
        return any(
            (frame.shared if name.startswith("self.") and frame.shared is not None else self.module_names).get(name)
            is not None
            for name in facts.reads
        )

    def _inline(
        self,
        call: ast.Call,
        function: FunctionNode,
        args: list[ScriptValue],
        frame: Scope,
        instance: ObjectOfClass | None = None,
    ) -> ScriptValue:
        """Run a function of this file where it is called: `instance` is the object a method
        runs on (by default the caller's `self` for its own class's methods)."""
        arguments = arguments_of(call)
        if function in frame.stack or len(frame.stack) >= MAX_INLINE_DEPTH:
            return None
        positional = [value for arg, value in zip(arguments, args) if arg.keyword is None and not arg.star]
        keywords = {arg.keyword: value for arg, value in zip(arguments, args) if arg.keyword is not None}
        class_name = self.class_of_function.get(function)
        if instance is not None:
            shared, class_name = instance.attributes, instance.class_name
        elif class_name is not None and class_name == frame.class_name:
            shared = frame.shared
        elif class_name is not None:
            shared = {}  # a static or class method called on its class: no `self` of the caller's
        else:
            shared = None
        inner = Scope(frame.context, shared, class_name, frame.branches, frame.stack, self.module_names)
        inner.conditions = frame.conditions
        if not self._may_matter(function, inner, args):
            self.ran.add(function)
            return None
        self._run_function(function, inner, positional, keywords, self.parameter_truths(call, function, frame))
        return merge_values(inner.returns)

    # --- library calls -----------------------------------------------------------------

    def _library_call(self, call: ast.Call, names: set[str], args: list[ScriptValue], frame: Scope) -> tuple[bool, ScriptValue]:
        arguments = arguments_of(call)
        first = args[0] if args and arguments[0].keyword is None else None
        if names <= GET_PEFT_MODEL:
            model = first if isinstance(first, ModelPart) else argument_value(call, args, "model")
            if isinstance(model, ModelPart):
                self._step(model, StepKind.PEFT_WRAPPED, call, frame)
                # A trainable copy of the input embeddings (`modules_to_save`): their output
                # requires grad, as with `enable_input_require_grads()`.
                second = args[1] if len(args) > 1 and arguments[1].keyword is None else argument_value(call, args, "peft_config")
                if isinstance(second, PeftConfigValue) and second.trains_embeddings:
                    self._step(model, StepKind.INPUT_GRADS, call, frame)
            return True, model
        if names and all(is_peft_config(name) for name in names):
            return True, peft_config_at(call)
        if names <= PREPARE_FOR_KBIT:
            model = first if isinstance(first, ModelPart) else argument_value(call, args, "model")
            if isinstance(model, ModelPart):
                enables = keyword_value(call, "use_gradient_checkpointing")
                kwargs = keyword_value(call, GC_KWARGS)
                self._step(
                    model,
                    StepKind.KBIT_PREPARED,
                    call,
                    frame,
                    subject=arguments[0].value if first is not None else None,
                    kwargs=HfCheckpointingKwargs.of_ast(dict_expression(kwargs, frame)) if kwargs is not None else None,
                    enables_checkpointing=True if enables is None else literal_value(enables),
                )
            return True, model
        if names <= SAME_MODEL_FUNCTIONS:
            return True, first if isinstance(first, ModelPart) else None
        if names == {"deepspeed.initialize"}:
            # `engine, optimizer, _, _ = deepspeed.initialize(model=model, ...)`: the engine
            # runs the model's forward.
            model = argument_value(call, args, "model")
            return True, TupleValue((model, None, None, None)) if isinstance(model, ModelPart) else None
        # Without `is_trainable=True` the adapters are loaded frozen, for inference.
        trainable = keyword_value(call, "is_trainable")
        trainable_adapters = trainable is not None and not is_false(trainable)
        if all(is_peft_model_loader(name) for name in names):
            model = first if isinstance(first, ModelPart) else argument_value(call, args, "model")
            if isinstance(model, ModelPart) and trainable_adapters:
                self._step(model, StepKind.PEFT_WRAPPED, call, frame)
            return True, model
        if all(is_auto_peft_loader(name) for name in names):
            created = self._new_model(classify_model_class(next(iter(names)).rsplit(".", 1)[0]), call, frame)
            if trainable_adapters:
                self._step(created, StepKind.PEFT_WRAPPED, call, frame)
            return True, created
        if all(self._is_training_arguments(name) for name in names):
            return True, training_arguments_of(call, frame)
        trainer = self._trainer_kind(names)
        if trainer is not None:
            model = self._trainer(call, args, trainer, frame)
            if model is not None and self._trainer_may_set_cache(names):
                self._step(model, StepKind.USE_CACHE_OFF, call, frame)  # its own code may turn it off
            return True, None
        model_classes = {self._model_class_of(name) for name in names}
        if len(model_classes) == 1 and None not in model_classes:
            model_class = model_classes.pop()
            checkpoint = arguments[0].value if arguments and arguments[0].keyword is None else keyword_value(
                call, "pretrained_model_name_or_path")
            if string_value(checkpoint) is not None:
                model_class = with_checkpoint(model_class, string_value(checkpoint))
            return True, self._new_model(model_class, call, frame)
        if all(is_config_class(name) for name in names):
            return True, config_at(call, frame)
        return False, None

    def _model_class_of(self, name: str) -> ModelClass | None:
        """The model class a call creates an instance of (`X(...)`, `X.from_pretrained`)."""
        for suffix in (".from_pretrained", "._from_config", ".from_config"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        local = name.removeprefix(module_name(self.relative_path) + ".")
        if local in self.classes:
            if not self._is_pretrained_model_subclass(local):
                return None
            return classify_model_class(local, main_input_name=self.main_input_names.get(local))
        if name.split(".", 1)[0] == "transformers" and is_model_class_name(name):
            return classify_model_class(name)
        return None

    def _is_pretrained_model_subclass(self, class_name: str, seen: frozenset[str] = frozenset()) -> bool:
        node = self.classes.get(class_name)
        if node is None or class_name in seen:
            return False
        for base in node.bases:
            for name in self._absolute_names(base):
                local = name.removeprefix(module_name(self.relative_path) + ".")
                if local in self.classes:
                    if self._is_pretrained_model_subclass(local, seen | {class_name}):
                        return True
                elif name.split(".", 1)[0] == "transformers" and (
                    name.endswith("PreTrainedModel") or is_model_class_name(name)
                ):
                    return True
        return False

    def _new_model(self, model_class: ModelClass | None, call: ast.Call, frame: Scope) -> ModelPart:
        arguments = arguments_of(call)
        quantized = quantized_at_load(call, frame)
        obj = ModelObject(model_class, quantized, frame.context)
        remote = keyword_value(call, "trust_remote_code")
        obj.remote_code = remote is not None and not is_false(remote)
        self.objects.append(obj)
        part = ModelPart(obj)
        self._cache_off_by_keyword(part, call, frame)
        config_arg = keyword_value(call, "config")
        loads_weights = isinstance(call.func, ast.Attribute) and call.func.attr == "from_pretrained"
        if loads_weights:
            source = keyword_value(call, "pretrained_model_name_or_path")
            if source is None and arguments and arguments[0].keyword is None and not arguments[0].star:
                source = arguments[0].value
            if isinstance(source, ast.Constant) and isinstance(source.value, str):
                obj.checkpoint = source.value
        if config_arg is None and arguments and arguments[0].keyword is None and not loads_weights:
            config_arg = arguments[0].value  # `LlamaForCausalLM(config)`, `from_config(config)`
        if config_arg is not None:
            config = self._eval(config_arg, frame)
            if isinstance(config, ConfigValue):
                config.models.append(obj)
                if config.use_cache_off is not False:
                    self._step(part, StepKind.USE_CACHE_OFF, call, frame)
            else:
                self._step(part, StepKind.USE_CACHE_OFF, call, frame)  # a config not built here: unknown
        for arg in arguments:
            if arg.star == "**":
                value = self._eval(arg.value, frame)
                keys = value.keys if isinstance(value, DictValue) else None
                if keys is None or ("use_cache" in keys and not is_true(keys["use_cache"])):
                    self._step(part, StepKind.USE_CACHE_OFF, call, frame)
        return part

    def _hand_to_project(self, call: ast.Call, names: set[str], args: list[ScriptValue], frame: Scope) -> ModelPart | None:
        """Models passed to a project function of another module: what the project model says
        that function does to each (`ProjectIndex.handed_model`) happens at the call, and the
        model goes on here, unless the function trains it, checkpoints it, keeps it or hands
        it to code the index cannot see: then it has *escaped*, and the rules follow it with
        `model_fate`. Returns the model the function hands back as its value, if any."""
        arguments = arguments_of(call)
        handed_back = None
        for position, (arg, value) in enumerate(zip(arguments, args)):
            for part in parts_of(value):
                parameter = arg.keyword if arg.keyword is not None else position
                handed = None
                if part.path == () and not any(a.star for a in arguments) and len(names) == 1 and value is part:
                    handed = self.project.handed_model(next(iter(names)), parameter, call_arguments(call, frame))
                if handed is None or handed.leaves:
                    self._step(part, StepKind.ESCAPED, call, frame)
                    continue
                fate = handed.fate
                for done, kind in ((fate.cache_off, StepKind.USE_CACHE_OFF), (fate.input_grads, StepKind.INPUT_GRADS),
                                   (fate.peft, StepKind.PEFT_WRAPPED)):
                    if done:
                        self._step(part, kind, call, frame)
                if handed.returned:
                    handed_back = part
        return handed_back

    def _returned_model(self, call: ast.Call, names: set[str], frame: Scope) -> ScriptValue:
        """The model a project function of another module returns, as the project model
        knows it (`model = load_model(name)`): its class, and what the function did to it
        already. Checkpointing it enabled is that file's to report."""
        if len(names) != 1:
            return None
        function, arguments = next(iter(names)), call_arguments(call, frame)
        returned = self.project.returned_model(function, -1, arguments)
        if returned is None and self.unpacked is not None and self.unpacked[0] is call:
            # `policy, reference = load_models(name)`: each item the function returns.
            items = [self.project.returned_model(function, i, arguments) for i in range(self.unpacked[1])]
            if any(item is not None for item in items):
                return TupleValue(tuple(self._returned_part(item, call, frame) if item else None for item in items))
        return self._returned_part(returned, call, frame) if returned is not None else None

    def _returned_part(self, returned: ReturnedModel, call: ast.Call, frame: Scope) -> ModelPart:
        obj = ModelObject(classify_model_class(returned.model_class), returned.quantized, frame.context)
        obj.origin = returned
        obj.remote_code = returned.remote_code
        self.objects.append(obj)
        part = ModelPart(obj)
        for done, kind in ((returned.cache_off, StepKind.USE_CACHE_OFF), (returned.input_grads, StepKind.INPUT_GRADS),
                           (returned.peft, StepKind.PEFT_WRAPPED)):
            if done:
                self._step(part, kind, call, frame)
        return part

    def _trainer(self, call: ast.Call, args: list[ScriptValue], kind: TrainerKind, frame: Scope) -> ModelPart | None:
        """The model handed to a trainer, with its TRAINER step (None: no model known)."""
        call_args = arguments_of(call)
        positional = [value for arg, value in zip(call_args, args) if arg.keyword is None and not arg.star]
        model = argument_value(call, args, "model")
        if model is None and positional:
            model = positional[0]
        if not isinstance(model, ModelPart):
            return None
        training_arguments = argument_value(call, args, "args")
        if training_arguments is None and len(positional) > 1:
            training_arguments = positional[1]
        has_arguments = keyword_value(call, "args") is not None or len(positional) > 1 or any(a.star for a in call_args)
        if isinstance(training_arguments, TrainingArgumentsValue):
            enables, kwargs, arguments = training_arguments.enables, training_arguments.kwargs, training_arguments.node
        elif not has_arguments:
            enables, kwargs, arguments = False, None, None  # the default TrainingArguments
        else:
            enables, kwargs, arguments = None, None, None
        model_arg = keyword_value(call, "model")
        if model_arg is None and call_args and call_args[0].keyword is None:
            model_arg = call_args[0].value
        self._step(
            model,
            StepKind.TRAINER,
            call,
            frame,
            subject=model_arg,
            kwargs=kwargs,
            enables_checkpointing=enables,
            trainer=kind,
            arguments=arguments,
        )
        return model

    def _trainer_may_set_cache(self, names: set[str]) -> bool:
        """Whether a project class among the trainer's classes and their bases may set the
        KV cache itself (`model(**inputs, use_cache=False)` in its `compute_loss`): one of
        this file whose code names `use_cache`, or one of another module (its code is not
        read here). The library's own trainers are known."""
        prefix = module_name(self.relative_path) + "."
        for name in names:
            for ancestor in self._ancestors(name):
                local = ancestor.removeprefix(prefix)
                if local in self.classes:
                    if "use_cache" in self.source.of(self.classes[local]):
                        return True
                elif self.project.class_named(ancestor) is not None:
                    return True
        return False

    def _trainer_kind(self, names: set[str]) -> TrainerKind | None:
        if not all(name.rsplit(".", 1)[-1].endswith("Trainer") for name in names):
            return None
        kinds = set()
        for name in names:
            lineage = set(self._ancestors(name))
            if any(self._configures_checkpointing(n) for n in lineage):
                kinds.add(TrainerKind.OTHER)  # `self.args.gradient_checkpointing_kwargs = {...}` in its own code
            elif any(n.startswith("trl.") for n in lineage):
                kinds.add(TrainerKind.TRL)
            elif lineage & TRANSFORMERS_TRAINERS:
                kinds.add(TrainerKind.TRANSFORMERS)
            else:
                kinds.add(TrainerKind.OTHER)
        return kinds.pop() if len(kinds) == 1 else TrainerKind.OTHER

    def _configures_checkpointing(self, name: str) -> bool:
        """A project class (of this file or another) whose code sets how checkpointing runs."""
        local = name.removeprefix(module_name(self.relative_path) + ".")
        if local in self.classes:
            return any(word in self.source.of(self.classes[local]) for word in CHECKPOINTING_SETTINGS)
        facts = self.project.class_named(name)
        return facts is not None and facts.configures_checkpointing

    def _ancestors(self, name: str) -> list[str]:
        local = name.removeprefix(module_name(self.relative_path) + ".")
        if local in self.classes:
            found = [name]
            for base in self.classes[local].bases:
                for base_name in self._absolute_names(base):
                    if base_name != name:
                        found.extend(self._ancestors(base_name))
            return found
        return self.project.ancestors(name)

    def _is_training_arguments(self, name: str) -> bool:
        return name in TRAINING_ARGUMENTS_CLASSES or self.project.is_training_arguments(name)

    # --- names -------------------------------------------------------------------------

    def _absolute_names(self, expr: ast.expr) -> set[str]:
        if expr not in self._names:
            found = self.names.qualified(expr) if isinstance(expr, (ast.Name, ast.Attribute)) else frozenset()
            self._names[expr] = absolute_names(found, self.relative_path) if found else set()
        return self._names[expr]

    def _is_project_call(self, func: ast.expr) -> bool:
        """A function imported from another module of the project: it may do anything to a
        model handed to it."""
        if not isinstance(func, (ast.Name, ast.Attribute)):
            return False
        names = self.names.qualified(func)
        if any(q.source != "import" for q in names):
            return False  # a builtin, a local variable's method, a function of this file
        if any(q.name.startswith(".") for q in names):
            return True
        return any(self._is_project_name(name) for name in self._absolute_names(func))

    def _is_project_name(self, name: str) -> bool:
        parts = name.split(".")
        if parts[0] in HF_LIBRARY_ROOTS:
            return False
        own = module_name(self.relative_path)
        return any(
            (prefix := ".".join(parts[:end])) == own or self.project.has_module_prefix(prefix)
            for end in range(1, len(parts))
        )

    # --- steps -------------------------------------------------------------------------

    def _step(
        self,
        part: ModelPart,
        kind: StepKind,
        node: ast.AST,
        frame: Scope,
        when: Conditions = (),
        **details,
    ) -> None:
        """Record a step of the model where the frame is (`when`: what else must hold for it)."""
        self.order += 1
        function = self.project_names[frame.stack[-1]] if frame.stack else f"{self.module_name}.<module>"
        step = ModelStep(kind, self.order, node, frame.branches, frame.conditions + when, frame.statement, **details,
                         function=function, known=frame.known)
        for model in part.model.sharing_steps():
            model.steps.append(step)


def call_arguments(call: ast.Call, frame: Scope) -> tuple[tuple[str | int, bool | None], ...]:
    """The truth of each argument of a call to another module, as the project model takes
    it (`Event.arguments`): a literal, or a name whose truth the frame knows."""
    arguments = arguments_of(call)
    found: list[tuple[str | int, bool | None]] = []
    for position, arg in enumerate(arguments):
        if arg.star:
            found.append(("*", None))
        else:
            found.append((arg.keyword if arg.keyword is not None else position, literal_truth(arg.value, frame.known)))
    return tuple(found)
