"""What one function does to a Hugging Face model, as events of the project model.

A fine-tuning project loads its model in one module (`def load_model(): ...; return model`),
enables gradient checkpointing there or in the script, and trains it in another module (a
loop with `loss.backward()`, a `Trainer`, a Lightning `training_step`). The rules that
depend on the order of those steps (CKPT020, CKPT021) follow one model object through a
file with `ckptlint.model.script_models`; across functions and files they follow it through
these events, which `ProjectIndex.model_fate` and `ProjectIndex.returned_model` chain:

- `LOADED`: `m = AutoModelForCausalLM.from_pretrained(...)` (the class, and whether it is
  loaded in 4/8 bit), `m = LlamaForCausalLM(config)`;
- `RESULT` / `RETURNED`: `m = load_model(...)` (a project function) / `return m`;
- `FORWARD`, `BACKWARD`: `m(**batch)` and `loss.backward()` in one function: it trains `m`;
- `TRAINER`: `Trainer(model=m, ...)`;
- `USE_CACHE_OFF`: `m.config.use_cache = False`, `setattr(m.config, "use_cache", ...)`,
  `m(..., use_cache=False)`, `from_pretrained(..., use_cache=False)`, a config passed in;
- `INPUT_GRADS`: `m.enable_input_require_grads()`, a hook on `m.get_input_embeddings()` or on
  an embeddings part (`m.vision_model.embeddings`);
- `PEFT`, `KBIT`: `get_peft_model(m, ...)`, `prepare_model_for_kbit_training(m)`.

Names bound from the same model (`m = get_peft_model(m, cfg)`, `m.to(device)`) are the
extraction's `ALIAS` events; a model passed to a project function is its `CALL` event.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from ckptlint.model.syntax.ast_walk import child_nodes, own_nodes, statements
from ckptlint.model.file_facts.facts import Event, EventKind
from ckptlint.model.library.combined import LIBRARY_PREFIXES, SAME_MODEL_METHODS
from ckptlint.model.library.peft import (
    GET_PEFT_MODEL, PEFT_TRAINABLE_MODULES, PREPARE_FOR_KBIT, is_peft_config, trains_input_embeddings,
)
from ckptlint.model.library.transformers import EMBEDDING_PARTS, is_model_class_name
from ckptlint.model.syntax.call_syntax import dotted, keyword_argument

# Words without which a function's text holds none of these events (checked per file).
HF_WORDS = ("from_pretrained", "from_config", "use_cache", "backward", "training_step", "Trainer",
            "enable_input_require_grads", "register_forward_hook", "get_peft_model", "prepare_model_for_kbit_training", "gradient_checkpointing")

RETURNED_VALUE = "<returned>"  # the name of a model returned as soon as it is loaded
PASSED_RESULT = "<passed@"  # `enable(load(name))`: the inner call's value, named by its place
# `super().__init__(accelerator, policy)` in a method of `pkg.Sub`: `pkg.Sub.<super>.__init__`,
# the method of the next class of the instance's bases (`ckptlint.model.evaluation.fates`).
SUPER_CALL = "<super>"
KEPT_BY_BASE = "self.*"  # `kept_parameters` of a subclass: any `self.<attr>` its base's constructor may have kept


def passed_result(argument: ast.AST, resolve: Callable[[ast.AST], str | None]) -> str | None:
    """The name of the model a call hands straight to a project function
    (`enable_gc(load_model(name))`, `enable_gc(AutoModelForCausalLM.from_pretrained(name))`):
    one of its own, unique to the inner call."""
    if not isinstance(argument, ast.Call):
        return None
    callee = resolve(argument.func)
    if callee is None or not (loaded_class(callee) or _project_function(callee)):
        return None
    return f"{PASSED_RESULT}{argument.lineno}:{argument.col_offset}>"


def _project_function(callee: str) -> bool:
    """A function the project may define (not a library's, not a class)."""
    return not callee.startswith(LIBRARY_PREFIXES) and not callee.rsplit(".", 1)[-1][:1].isupper()
_LOADERS = (".from_pretrained", ".from_config", "._from_config")
_NOT_CALLED = frozenset({"print", "len", "range", "enumerate", "zip", "isinstance", "getattr", "setattr", "hasattr",
                         "super", "list", "dict", "tuple", "set", "int", "float", "str", "bool", "sorted", "iter",
                         "next", "max", "min", "sum", "any", "all", "type", "open"})


def loaded_class(callee: str | None) -> str | None:
    """The transformers / peft model class a call loads or builds (`transformers.X.from_pretrained`,
    `transformers.X(config)`), else None."""
    if callee is None or not callee.startswith(("transformers.", "peft.")):
        return None
    for suffix in _LOADERS:
        if callee.endswith(suffix):
            callee = callee[: -len(suffix)]
            break
    return callee if is_model_class_name(callee) else None


class HfEvents:
    """Collects one function's events from the nodes of its body, in the extraction's walk."""

    def __init__(
        self, resolve: Callable[[ast.AST], str | None], parameters: tuple[str, ...], name: str,
        kept: frozenset[str] = frozenset(),
    ) -> None:
        self.resolve = resolve
        self.parameters = set(parameters)
        # `self.<attr>` a constructor of the class stores a parameter in (the model a
        # trainer class is given): called in any method, that method runs it.
        self.kept = kept
        self.events: list[Event] = []
        self.called: list[tuple[str, int, int]] = []  # (name, line, column) of `name(...)` calls
        self.trains = name.rsplit(".", 1)[-1] == "training_step"  # Lightning runs backward after it
        self.unchanged: frozenset[str] = frozenset()  # parameters never rebound (`unchanged_parameters`)
        self.embedding_configs: set[str] = set()  # names bound to a PEFT config training the embeddings
        # Names bound to a model config built here (`cfg = LlamaConfig(...)`): whether its cache may be off.
        self.model_configs: dict[str, bool] = {}

    def statement(self, node: ast.AST) -> None:
        if isinstance(node, ast.Return) and node.value is not None:
            for index, value in _items(node.value):
                if isinstance(value, ast.Call) and loaded_class(self.resolve(value.func)):
                    # `return AutoModelForCausalLM.from_pretrained(name)`
                    self._loaded(value, [(-1, RETURNED_VALUE)], node)
                    self._add(EventKind.RETURNED, RETURNED_VALUE, node, parameter=index)
                    continue
                target = _model_name(value, self.resolve)
                if target is None and index == -1 and isinstance(value, ast.Call) and self._project_callee(value):
                    # `return load_model(name)`: the result of a project function, returned.
                    target = RETURNED_VALUE
                    self._add(EventKind.RESULT, target, node, callee=self._project_callee(value), parameter=-1,
                              arguments=call_arguments(value, self.unchanged))
                if target is not None:
                    self._add(EventKind.RETURNED, target, node, parameter=index)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            self._assignment(node)
        elif isinstance(node, ast.Call):
            self._call(node)

    def _assignment(self, node: ast.Assign | ast.AnnAssign) -> None:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        for target in targets:
            # `model.config.use_cache = False` (also `model.base_model.config`, a PEFT model's).
            written = dotted(target)
            if written is not None and written.endswith(".use_cache") and ".config" in written and not _is_true(value):
                owner = written[: written.index(".config")]
                if "generation_config" not in written:
                    self._add(EventKind.USE_CACHE_OFF, _strip_parts(owner), node)
            elif written is not None and written.endswith(".requires_grad") and EMBEDDING_PARTS.search(written) and not _is_false(value):
                self._add(EventKind.INPUT_GRADS, written.split(".")[0], node)
        bound = [(index, name) for target in targets for index, name in _bound_names(target)]
        for index, name in bound:
            self.embedding_configs.discard(name)
            self.model_configs.pop(name, None)
            if self._trains_embeddings(value):
                self.embedding_configs.add(name)
            if isinstance(value, ast.Call) and (self.resolve(value.func) or "").endswith("Config") and index == -1:
                self.model_configs[name] = _cache_off_at_load(value)
        for target in targets:
            written = dotted(target)
            if written is not None and written.endswith(".use_cache") and written[:-10] in self.model_configs and not _is_true(value):
                self.model_configs[written.removesuffix(".use_cache")] = True
        if isinstance(value, ast.Call) and loaded_class(self.resolve(value.func)) is not None:
            self._loaded(value, bound, node)
            return
        # `model = build(args)`, `model = build(args) if args.fast else build_slow(args)`
        calls = [value] if isinstance(value, ast.Call) else [
            branch for branch in (value.body, value.orelse) if isinstance(branch, ast.Call)
        ] if isinstance(value, ast.IfExp) else []
        for call in calls:
            callee = self._project_callee(call)
            if callee is not None:
                for index, name in bound:
                    self._add(EventKind.RESULT, name, node, callee=callee, parameter=index, arguments=call_arguments(call, self.unchanged))

    def _config_without_cache(self, call: ast.Call) -> bool:
        """`LlamaForCausalLM(cfg)`, `from_config(cfg)`: the config handed over positionally
        may turn the cache off (built here with `use_cache=False` or `**kwargs`, or set so
        after). A config from elsewhere counts as leaving it on, as before."""
        config = call.args[0] if call.args else None
        if isinstance(config, ast.Call):
            return _cache_off_at_load(config)
        return isinstance(config, ast.Name) and self.model_configs.get(config.id, False)

    def _trains_embeddings(self, config: ast.AST | None) -> bool:
        """`LoraConfig(..., modules_to_save=["embed_tokens"])`: a PEFT config whose literals
        make the input embeddings trainable."""
        if not isinstance(config, ast.Call) or not is_peft_config(self.resolve(config.func) or ""):
            return False
        trains = False
        for keyword in PEFT_TRAINABLE_MODULES:
            value = keyword_argument(config, keyword)
            if isinstance(value, (ast.List, ast.Tuple)):
                names = tuple(e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
                indices = keyword == "trainable_token_indices" and value.elts and not names
                trains |= trains_input_embeddings(keyword, None if indices else names)
            elif isinstance(value, ast.Dict):
                keys = tuple(k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
                trains |= trains_input_embeddings(keyword, keys)
        return trains

    def _project_callee(self, call: ast.Call) -> str | None:
        """The function a call runs when it may be the project's own (not a library's, not a
        class)."""
        callee = self.resolve(call.func)
        return callee if callee is not None and _project_function(callee) else None

    def _loaded(self, call: ast.Call, bound: list[tuple[int, str]], node: ast.AST) -> None:
        quantized = any(
            keyword_argument(call, k) is not None and not _is_false(keyword_argument(call, k))
            for k in ("load_in_4bit", "load_in_8bit", "quantization_config")
        )
        for index, name in bound:
            if index == -1:
                model_class = loaded_class(self.resolve(call.func))
                remote = keyword_argument(call, "trust_remote_code")
                flags = ("quantized",) * quantized + ("remote",) * (remote is not None and not _is_false(remote))
                self._add(EventKind.LOADED, name, node, api=model_class, source=" ".join(flags))
                if _cache_off_at_load(call) or self._config_without_cache(call):
                    self._add(EventKind.USE_CACHE_OFF, name, node)

    def _call(self, call: ast.Call) -> None:
        func = call.func
        callee = self.resolve(func)
        if callee is not None and _project_function(callee):
            self._passed_results(call)
        if isinstance(func, ast.Attribute):
            owner = dotted(func.value)
            if func.attr == "backward":
                self._add(EventKind.BACKWARD, owner or "", call)
            elif func.attr == "enable_input_require_grads" and owner is not None:
                self._add(EventKind.INPUT_GRADS, _strip_parts(owner), call)
            elif func.attr == "register_forward_hook":
                hooked = _embeddings_owner(func.value)
                if hooked is not None:
                    self._add(EventKind.INPUT_GRADS, hooked, call)
            elif func.attr == "requires_grad_" and owner is not None and EMBEDDING_PARTS.search(owner):
                self._add(EventKind.INPUT_GRADS, owner.split(".")[0], call)
            elif func.attr == "forward" and owner is not None:
                self._add(EventKind.FORWARD, owner, call)
        if isinstance(func, ast.Name) and func.id == "setattr" and len(call.args) >= 2:
            owner = dotted(call.args[0])
            name = call.args[1]
            if owner is not None and owner.endswith(".config") and isinstance(name, ast.Constant) and name.value == "use_cache":
                if len(call.args) < 3 or not _is_true(call.args[2]):
                    self._add(EventKind.USE_CACHE_OFF, _strip_parts(owner.removesuffix(".config")), call)
        first = call.args[0] if call.args else keyword_argument(call, "model")
        first_name = dotted(first) if first is not None else None
        if callee in GET_PEFT_MODEL and first_name is not None:
            self._add(EventKind.PEFT, first_name, call)
            # A trainable copy of the input embeddings (`modules_to_save`): input grads.
            config = call.args[1] if len(call.args) > 1 else keyword_argument(call, "peft_config")
            if self._trains_embeddings(config) or (isinstance(config, ast.Name) and config.id in self.embedding_configs):
                self._add(EventKind.INPUT_GRADS, first_name, call)
        elif callee in PREPARE_FOR_KBIT and first_name is not None:
            enables = keyword_argument(call, "use_gradient_checkpointing")
            self._add(EventKind.KBIT, first_name, call, source="" if enables is None or not _is_false(enables) else "off")
        elif (callee or dotted(func) or "").rsplit(".", 1)[-1].endswith("Trainer"):
            model = keyword_argument(call, "model") or (call.args[0] if call.args else None)
            target = dotted(model) if model is not None else None
            if target is not None:
                self._add(EventKind.TRAINER, target, call, api=callee or dotted(func) or "")
        # `model(**batch)` (a local name, not a function of the file or an import) or
        # `self.model(...)`: the module runs.
        called = dotted(func)
        if called is not None and (
            (isinstance(func, ast.Name) and callee is None and called not in _NOT_CALLED)
            or (called.startswith("self.") and called.count(".") == 1)
        ):
            use_cache = keyword_argument(call, "use_cache")
            if use_cache is not None and not _is_true(use_cache):
                self._add(EventKind.USE_CACHE_OFF, called, call)
            self.called.append((called, call.lineno, call.col_offset))

    def _passed_results(self, call: ast.Call) -> None:
        """A model loaded or built by the inner call of `enable(load(name))`, under the name
        `passed_result` gives it (the call event the extraction records uses the same)."""
        for argument in (*call.args, *(k.value for k in call.keywords if k.arg)):
            name = passed_result(argument, self.resolve)
            if name is None:
                continue
            if loaded_class(self.resolve(argument.func)):
                self._loaded(argument, [(-1, name)], argument)
            else:
                self._add(EventKind.RESULT, name, argument, callee=self._project_callee(argument), parameter=-1,
                          arguments=call_arguments(argument, self.unchanged))

    def finish(self, other_events: list[Event], *, method: bool) -> list[Event]:
        """The events that can concern a model, with a `FORWARD` for each name called as a
        function where that can be training: in a function that trains (calls
        `.backward(`), for parameters and names bound from them anywhere (a
        `compute_loss(model, batch)` helper), and for what the class's constructor keeps of
        its parameters (`self.policy` in a trainer's `compute_loss(self, batch)`). A result bound or a value returned is kept
        only for a name something else here makes a model (loaded, run in training, wrapped,
        its cache or checkpointing touched, kept in `self.<attr>`), or, in a function that
        is not a method, for a result it returns or passes on (`build()` returning
        `load_model()`'s model, `train_loop(model)`): the methods of modeling code bind and
        return tensors all day long."""
        aliases = {e.target: e.source for e in other_events if e.kind is EventKind.ALIAS}
        trains = self.trains or any(e.kind is EventKind.BACKWARD for e in self.events)
        if self.trains:
            self.events.insert(0, Event(EventKind.BACKWARD, "", 0, 0))
        for name, line, column in self.called:
            root = aliases.get(name, name)
            if trains or root in self.parameters or name.split(".")[0] in self.parameters or name in self.kept or (
                KEPT_BY_BASE in self.kept and name.startswith("self.") and name.count(".") == 1
            ):
                self.events.append(Event(EventKind.FORWARD, name, line, column))
        models = {e.target for e in self.events if e.kind not in (EventKind.RESULT, EventKind.RETURNED, EventKind.BACKWARD)}
        models |= {e.target for e in other_events if e.kind is EventKind.HF_GC}
        models |= {e.target for e in self.events if e.kind is EventKind.RESULT and e.target.startswith("self.")}
        returned = {e.target for e in self.events if e.kind is EventKind.RETURNED}
        if not method:
            # A script's function: a result it returns or hands to a project function.
            passed = {e.target for e in other_events if e.kind is EventKind.CALL}
            models |= {e.target for e in self.events if e.kind is EventKind.RESULT and e.target in returned | passed}
        for target, source in aliases.items():
            if source in models:
                models.add(target)
            if target in models:
                models.add(source)
        return [e for e in self.events if e.kind not in (EventKind.RESULT, EventKind.RETURNED) or e.target in models]

    def _add(self, kind: EventKind, target: str, node: ast.AST, **fields) -> None:
        self.events.append(Event(kind, target, node.lineno, node.col_offset, **fields))


def call_arguments(call: ast.Call, parameters: frozenset[str] = frozenset()) -> tuple[tuple[str | int, bool | str | None], ...]:
    """The truth of each argument of a call, by position or keyword: a literal's
    (`quantized=False`), or the name of one of the calling function's `parameters` it hands
    on (`lora=lora`: as true as the caller's); `("*", None)` for `*args` / `**kwargs`, which
    may pass anything."""
    found: list[tuple[str | int, bool | str | None]] = []
    for position, arg in enumerate(call.args):
        found.append(("*", None) if isinstance(arg, ast.Starred) else (position, _literal_truth(arg, parameters)))
    for keyword in call.keywords:
        found.append((keyword.arg, _literal_truth(keyword.value, parameters)) if keyword.arg else ("*", None))
    return tuple(found)


def _literal_truth(expr: ast.AST, parameters: frozenset[str] = frozenset()) -> bool | str | None:
    if isinstance(expr, ast.Name) and expr.id in parameters:
        return expr.id
    if isinstance(expr, ast.Constant):
        return bool(expr.value)
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = _literal_truth(expr.operand)
        return None if inner is None else not inner
    return None


Guard = tuple[tuple[str, bool], ...]


def parameter_guards(
    body: list[ast.stmt], parameters: tuple[str, ...], unchanged: frozenset[str] | None = None
) -> dict[tuple[int, int], Guard]:
    """What the function's parameters must be for the code at each (line, column) of its body
    to run: the truth the enclosing `if`s and conditional-expression arms need of a parameter
    (`if quantized:`, `if not lora:`, `if a and b:`). Parameters the body rebinds say
    nothing; nested functions are guarded by their own. `unchanged`: the body's
    `unchanged_parameters`, when the caller has them."""
    usable = unchanged_parameters(body, parameters) if unchanged is None else unchanged
    if not usable or not any(isinstance(n, (ast.If, ast.IfExp)) for n in own_nodes(body)):
        return {}
    found: dict[tuple[int, int], Guard] = {}
    stack: list[tuple[ast.AST, Guard]] = [(node, ()) for node in reversed(body)]
    while stack:
        node, guard = stack.pop()
        if guard and hasattr(node, "lineno"):
            found[(node.lineno, node.col_offset)] = guard  # a node shares its place with its first child
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.If, ast.IfExp)):
            arms = (node.body, node.orelse) if isinstance(node, ast.If) else ([node.body], [node.orelse])
            children = [(child, guard + _test_guard(node.test, truth, usable)) for block, truth in zip(arms, (True, False))
                        for child in block]
            children.insert(0, (node.test, guard))
        else:
            children = [(child, guard) for child in child_nodes(node)]
        stack.extend(reversed(children))
    return found


class UnchangedParameters:
    """`unchanged_parameters(body, parameters)`, computed when first asked: most functions
    record no event that needs it."""

    __slots__ = ("_body", "_parameters", "_names")

    def __init__(self, body: list[ast.stmt], parameters: tuple[str, ...]) -> None:
        self._body, self._parameters = body, parameters
        self._names: frozenset[str] | None = None

    @property
    def names(self) -> frozenset[str]:
        if self._names is None:
            self._names = unchanged_parameters(self._body, self._parameters)
        return self._names

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __bool__(self) -> bool:
        return bool(self.names)

    def __iter__(self):
        return iter(self.names)


def unchanged_parameters(body: list[ast.stmt], parameters: tuple[str, ...]) -> frozenset[str]:
    """The parameters the function's own code never rebinds: they hold what the call passed."""
    rebound = {n.id for n in own_nodes(body) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    return frozenset(parameters) - rebound


def _test_guard(test: ast.AST, truth: bool, parameters: set[str]) -> Guard:
    """What `test` having `truth` says of the parameters' truth (the parts it cannot say are
    left out: a conjunction holds only if each part does)."""
    if isinstance(test, ast.Name):
        return ((test.id, truth),) if test.id in parameters else ()
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _test_guard(test.operand, not truth, parameters)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) == truth:
        return tuple(pair for value in test.values for pair in _test_guard(value, truth, parameters))
    return ()


def _items(value: ast.AST) -> list[tuple[int, ast.AST]]:
    if isinstance(value, ast.Tuple):
        return list(enumerate(value.elts))
    return [(-1, value)]


def _bound_names(target: ast.AST) -> list[tuple[int, str]]:
    if isinstance(target, (ast.Tuple, ast.List)):
        return [(index, dotted(element)) for index, element in enumerate(target.elts) if dotted(element)]
    name = dotted(target)
    return [(-1, name)] if name else []


def _model_name(value: ast.AST, resolve: Callable[[ast.AST], str | None]) -> str | None:
    """The name a returned value is the same model as: `model`, `model.to(device)`,
    `get_peft_model(model, cfg)`."""
    if isinstance(value, (ast.Name, ast.Attribute)):
        return dotted(value)
    if isinstance(value, ast.Call):
        if isinstance(value.func, ast.Attribute) and value.func.attr in SAME_MODEL_METHODS:
            return dotted(value.func.value)
        if resolve(value.func) in GET_PEFT_MODEL | PREPARE_FOR_KBIT and value.args:
            return dotted(value.args[0])
    return None


def _cache_off_at_load(call: ast.Call) -> bool:
    """`from_pretrained(..., use_cache=<anything but True>)`, a config built elsewhere, or
    `**kwargs`: the cache may be off (as `script_models` counts it)."""
    use_cache = keyword_argument(call, "use_cache")
    if use_cache is not None and not _is_true(use_cache):
        return True
    if keyword_argument(call, "config") is not None:
        return True
    return any(keyword.arg is None for keyword in call.keywords)


def _embeddings_owner(hooked: ast.AST) -> str | None:
    """The model whose input embeddings `hooked` is, for a forward hook registered on it:
    `model.get_input_embeddings()`, or an attribute path through an embeddings part
    (`model.vision_model.embeddings`, `self.model.embed_tokens`)."""
    if isinstance(hooked, ast.Call):
        inner = hooked.func
        if isinstance(inner, ast.Attribute) and EMBEDDING_PARTS.search(inner.attr) and dotted(inner.value):
            return _strip_parts(dotted(inner.value))
        return None
    path = dotted(hooked)
    parts = path.split(".") if path is not None else []
    root = 2 if parts[:1] == ["self"] else 1
    if len(parts) > root and any(EMBEDDING_PARTS.search(part) for part in parts[root:]):
        return ".".join(parts[:root])
    return None


def _strip_parts(name: str) -> str:
    """`model.base_model.model` -> `model`: a part shares the model's config."""
    for part in (".base_model", ".model", ".module"):
        if part in name and not name.startswith("self."):
            name = name[: name.index(part)]
    return name


def _is_true(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is True


def _is_false(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value in (False, None, 0)


def prepared_in_order(targets: list[ast.AST], value: ast.AST | None) -> list[tuple[str, str]]:
    """`self.policy, self.optimizer = accelerator.prepare(policy, optimizer)`: accelerate's
    `prepare(*args)` hands back its arguments, wrapped, in order; each name is the same
    object as the argument at its position."""
    if not (
        isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "prepare"
        and len(value.args) > 1 and not value.keywords and not any(isinstance(a, ast.Starred) for a in value.args)
    ):
        return []
    pairs = []
    for target in targets:
        if isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == len(value.args):
            for element, argument in zip(target.elts, value.args):
                name, source = dotted(element), dotted(argument)
                if name is not None and source is not None and name != source:
                    pairs.append((name, source))
    return pairs


def kept_parameters(node: ast.ClassDef, bases: list[str]) -> frozenset[str]:
    """The `self.<attr>` a class's `__init__` stores one of its parameters in, as given
    (`self.policy = policy`) or prepared by accelerate with others
    (`self.policy, self.optimizer = accelerator.prepare(policy, optimizer)`); with
    `KEPT_BY_BASE` for a subclass of a project class, whose constructor may keep any."""
    init = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None)
    project_base = any(b not in ("object", "builtins.object") and not b.startswith(LIBRARY_PREFIXES) for b in bases)
    inherited = {KEPT_BY_BASE} if project_base else set()
    if init is None or not init.args.args:
        return frozenset(inherited)
    self_name = init.args.args[0].arg
    parameters = {a.arg for a in (*init.args.posonlyargs, *init.args.args[1:], *init.args.kwonlyargs)}
    kept: set[str] = set()
    for statement in ast.walk(init):
        if not isinstance(statement, ast.Assign):
            continue
        pairs = prepared_in_order(statement.targets, statement.value)
        if isinstance(statement.value, ast.Name):
            pairs += [(dotted(target), statement.value.id) for target in statement.targets]
        kept |= {
            name for name, source in pairs
            if name is not None and name.startswith(f"{self_name}.") and name.count(".") == 1 and source in parameters
        }
    return frozenset(kept | inherited)


def super_callee(call: ast.Call, enclosing_class: str | None) -> str | None:
    """`super().method(...)` (or `super(Sub, self).method(...)`) in a method of a class:
    the method as `SUPER_CALL` names it."""
    func = call.func
    if enclosing_class is None or not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Call):
        return None
    inner = func.value
    if isinstance(inner.func, ast.Name) and inner.func.id == "super" and len(inner.args) in (0, 2):
        return f"{enclosing_class}.{SUPER_CALL}.{func.attr}"
    return None


def chosen_callables(body: list[ast.stmt]) -> frozenset[str]:
    """The names a block's own code binds to a class or function it picks, which a call
    through the name then runs: another name for one (`TrainerClass = trainers.DPOTrainer`),
    one fetched by a name known at run time (`getattr(trainers, config.trainer)`,
    `models.__dict__[args.arch]`, `MODELS[name]`), or either of two (`A if flag else B`)."""
    return frozenset(
        target.id
        for node in statements(body)  # assignments are statements: no expression is entered
        if isinstance(node, ast.Assign) and _picks_callable(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    )


def _picks_callable(value: ast.AST) -> bool:
    if isinstance(value, ast.IfExp):
        return _picks_callable(value.body) and _picks_callable(value.orelse)
    if isinstance(value, ast.Call):
        return isinstance(value.func, ast.Name) and value.func.id == "getattr" and len(value.args) == 2
    return isinstance(value, (ast.Name, ast.Attribute, ast.Subscript))
