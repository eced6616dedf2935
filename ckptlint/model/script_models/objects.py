"""The objects the interpreter tracks through a script (models, their parts, configs,
`TrainingArguments`, dicts, tuples, instances of the file's classes) and the scopes that name
them."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Union

import ast

from ckptlint.model.form.branching import Branches, Conditions
from ckptlint.model.library.transformers import GC_KWARGS, HfCheckpointingKwargs, KwargsShape
from ckptlint.model.script_models.steps import ModelStep
from ckptlint.model.script_models.syntax import (
    arguments_of, dict_keys, is_false, is_true, keyword_value, literal_value, string_value,
)
from ckptlint.model.library.peft import PEFT_TRAINABLE_MODULES, trains_input_embeddings
from ckptlint.model.library.transformers import EMBEDDING_PARTS, ModelClass


class TrainingContext:
    def __init__(self) -> None:
        # Steps up to this order happened before the first training step of the context.
        self.training_starts: int | None = None

    def start_training(self, order: int) -> None:
        if self.training_starts is None:
            self.training_starts = order


class ModelObject:
    def __init__(self, model_class: ModelClass | None, quantized: bool | None, context: TrainingContext) -> None:
        self.model_class = model_class
        self.quantized = quantized
        self.context = context
        self.steps: list[ModelStep] = []
        self.origin: object = None  # ReturnedModel: returned by a project function of another module
        self.remote_code = False  # loaded with `trust_remote_code=True`: the Hub's code is the model
        self.checkpoint: str | None = None  # `from_pretrained("bert-base-uncased")`: the id, a literal
        # Objects another branch of an `if` bound to the same name: they get this one's later steps.
        self.merged: list[ModelObject] = []

    def sharing_steps(self) -> list[ModelObject]:
        """This object and those its steps also happen to (`merged`, transitively)."""
        found, pending = [self], list(self.merged)
        while pending:
            current = pending.pop()
            if all(current is not seen for seen in found):
                found.append(current)
                pending.extend(current.merged)
        return found


@dataclass(frozen=True)
class ModelPart:
    """A model object, or an attribute / method result of it (`model.config`,
    `model.get_input_embeddings()`): every part shares the model's layers and config."""

    model: ModelObject
    path: tuple[str, ...] = ()

    def child(self, name: str) -> ModelPart:
        return ModelPart(self.model, self.path + (name,))

    @property
    def is_embedding(self) -> bool:
        return any(EMBEDDING_PARTS.search(name) for name in self.path)


class ConfigValue:
    """A `PretrainedConfig` built in the script; its `use_cache` as far as it is set."""

    def __init__(self, use_cache_off: bool | None) -> None:
        self.use_cache_off = use_cache_off  # None: not known (e.g. `**kwargs`)
        self.models: list[ModelObject] = []


class TrainingArgumentsValue:
    def __init__(self, node: ast.Call, enables: bool | None, kwargs: HfCheckpointingKwargs) -> None:
        self.node = node
        self.enables = enables
        self.kwargs = kwargs


class DictValue:
    """A dict literal (or `dict(...)`) bound to a name: its string keys, while known."""

    def __init__(self, expression: ast.expr | None, keys: dict[str, ast.expr] | None) -> None:
        self.expression = expression  # None once it was changed after being built
        self.keys = keys  # None: not known


@dataclass(frozen=True)
class TupleValue:
    items: tuple


class ObjectOfClass:
    """An object of a class defined in this file (a trainer class, a model wrapper, a
    helper class): its `self.*` names, shared by the methods run on it."""

    def __init__(self, class_name: str) -> None:
        self.class_name = class_name
        self.attributes: dict[str, ScriptValue] = {}


@dataclass(frozen=True)
class PeftConfigValue:
    """A PEFT adapter configuration built in the script (`LoraConfig(...)`): whether it makes
    the input embeddings trainable (`modules_to_save=["embed_tokens"]`)."""

    trains_embeddings: bool


ScriptValue = Union[
    ModelPart, ConfigValue, TrainingArgumentsValue, DictValue, TupleValue, ObjectOfClass, PeftConfigValue, None
]


class Scope:
    def __init__(
        self,
        context: TrainingContext,
        shared: dict[str, ScriptValue] | None = None,
        class_name: str | None = None,
        branches: Branches = (),
        stack: tuple[ast.FunctionDef | ast.AsyncFunctionDef, ...] = (),
        module_names: dict[str, ScriptValue] | None = None,
    ) -> None:
        self.context = context
        self.locals: dict[str, ScriptValue] = {}
        # The module's names, read by functions that do not bind them (`global` semantics
        # are not modelled: functions do not rebind module names here).
        self.module_names = module_names
        self.shared = shared  # `self.*` of a class context, across its methods
        self.class_name = class_name  # qualified name of the class whose `self` this is
        self.branches = branches
        self.conditions: Conditions = ()
        # What is known to hold where the code runs: a parameter's truth, from the literal a
        # call passes or the default it leaves (`(("quantized", False),)`); a branch it
        # contradicts is not taken.
        self.known: Conditions = ()
        self.stack = stack
        self.returns: list[ScriptValue] = []
        self.statement: ast.stmt | None = None  # the small statement being run

    def _table(self, name: str) -> dict[str, ScriptValue]:
        if self.shared is not None and name.startswith("self."):
            return self.shared
        return self.locals

    def lookup(self, name: str) -> ScriptValue:
        table = self._table(name)
        if name in table:
            return table[name]
        if self.module_names is not None and table is self.locals:
            return self.module_names.get(name)
        return None

    def bind(self, name: str, value: ScriptValue) -> None:
        table = self._table(name)
        if any(atom == name for atom, _ in self.known):
            self.known = tuple((atom, truth) for atom, truth in self.known if atom != name)
        # Rebinding `model` also forgets what was bound under `model.*`.
        for key in [key for key in table if key.startswith(name + ".")]:
            del table[key]
        if value is None:
            table.pop(name, None)
        else:
            table[name] = value


# --- interpretation ---------------------------------------------------------------------------


def same_value(a: ScriptValue, b: ScriptValue) -> bool:
    if isinstance(a, ModelPart) and isinstance(b, ModelPart):
        return a.model is b.model
    return a is b


def parts_of(value: ScriptValue, _seen: frozenset[int] = frozenset()) -> Iterator[ModelPart]:
    """The models a value holds (a tuple's items, an object's attributes)."""
    if isinstance(value, ModelPart):
        yield value
    elif isinstance(value, TupleValue):
        for item in value.items:
            yield from parts_of(item, _seen)
    elif isinstance(value, ObjectOfClass) and id(value) not in _seen:
        for item in list(value.attributes.values()):
            yield from parts_of(item, _seen | {id(value)})


def merge_values(values: list[ScriptValue]) -> ScriptValue:
    """What a function returns, over its `return` statements (bare ones excluded)."""
    found = [v for v in values if v is not None]
    if not found:
        return None
    first = found[0]
    if all(same_value(first, v) for v in found):
        return first
    if isinstance(first, TupleValue) and all(isinstance(v, TupleValue) and len(v.items) == len(first.items) for v in found):
        return TupleValue(tuple(merge_values([v.items[i] for v in found]) for i in range(len(first.items))))
    return None


def argument_value(call: ast.Call, args: list[ScriptValue], name: str) -> ScriptValue:
    for arg, value in zip(arguments_of(call), args):
        if arg.keyword == name:
            return value
    return None


def dict_expression(expr: ast.expr | None, frame: Scope) -> ast.expr | None:
    """A kwargs expression, with a name bound to an unchanged dict literal replaced by it."""
    if isinstance(expr, ast.Name):
        value = frame.lookup(expr.id)
        if isinstance(value, DictValue) and value.expression is not None:
            return value.expression
    return expr


def gc_enable_kwargs(call: ast.Call, frame: Scope) -> HfCheckpointingKwargs:
    arguments = arguments_of(call)
    if any(arg.star for arg in arguments):
        return HfCheckpointingKwargs(KwargsShape.UNKNOWN)
    positional = [arg for arg in arguments if arg.keyword is None]
    value = positional[0].value if positional else keyword_value(call, GC_KWARGS)
    return HfCheckpointingKwargs.of_ast(dict_expression(value, frame))


def training_arguments_of(call: ast.Call, frame: Scope) -> TrainingArgumentsValue:
    if any(arg.star for arg in arguments_of(call)):
        return TrainingArgumentsValue(call, None, HfCheckpointingKwargs(KwargsShape.UNKNOWN))
    enabled = keyword_value(call, "gradient_checkpointing")
    kwargs = HfCheckpointingKwargs.of_ast(dict_expression(keyword_value(call, GC_KWARGS), frame), trainer_path=True)
    return TrainingArgumentsValue(call, False if enabled is None else literal_value(enabled), kwargs)


def config_at(call: ast.Call, frame: Scope) -> ConfigValue:
    use_cache = keyword_value(call, "use_cache")
    if any(arg.star == "**" for arg in arguments_of(call)):
        return ConfigValue(None)
    return ConfigValue(use_cache is not None and not is_true(use_cache))


def peft_config_at(call: ast.Call) -> PeftConfigValue:
    """What a PEFT config call makes trainable, from the literals it is given (a module list
    in a variable counts as not naming the embeddings)."""
    trains = False
    for keyword in PEFT_TRAINABLE_MODULES:
        value = keyword_value(call, keyword)
        if isinstance(value, (ast.List, ast.Tuple)):
            elements = [e.value if isinstance(e, ast.Starred) else e for e in value.elts]
            names = tuple(text for text in map(string_value, elements) if text is not None)
            indices = keyword == "trainable_token_indices" and value.elts and not names
            trains |= trains_input_embeddings(keyword, None if indices else names)
        elif value is not None and dict_keys(value) is not None:
            trains |= trains_input_embeddings(keyword, tuple(dict_keys(value)))
    return PeftConfigValue(trains)


def quantized_at_load(call: ast.Call, frame: Scope) -> bool | None:
    for name in ("load_in_4bit", "load_in_8bit"):
        value = keyword_value(call, name)
        if value is not None and not is_false(value):
            return True
    config = keyword_value(call, "quantization_config")
    if config is not None and not is_false(config):
        return True
    for arg in arguments_of(call):
        if arg.star == "**":
            value = frame.lookup(arg.value.id) if isinstance(arg.value, ast.Name) else None
            keys = value.keys if isinstance(value, DictValue) else None
            if keys is None:
                return None
            if any(k in keys and not is_false(keys[k]) for k in ("load_in_4bit", "load_in_8bit", "quantization_config")):
                return True
    return False


def bound_models(frame: Scope) -> dict:
    """The model objects the frame's names (and `self.*`) hold now."""
    found = {("local", name): value for name, value in frame.locals.items() if isinstance(value, ModelPart) and not value.path}
    if frame.shared is not None:
        found.update(
            (("self", name), value) for name, value in frame.shared.items() if isinstance(value, ModelPart) and not value.path
        )
    return found


def merge_branch_models(before: dict, first: dict, last: dict) -> None:
    """After `if ...: model = A(...)` / `else: model = B(...)`, the name holds either object:
    what the code after the `if` does to it (`model.config.use_cache = False`) happens to
    both. The interpreter keeps the last branch's object bound and lets it pass its steps on
    to the first's (`ModelObject.merged`); `before`, `first`, `last`: `bound_models` before
    the `if`, after its first branch, after the last."""
    for key, value in last.items():
        other = first.get(key)
        if other is not None and other.model is not value.model and before.get(key) is not other:
            value.model.merged.append(other.model)
