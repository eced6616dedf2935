"""Hugging Face and PEFT model objects in a training script, and what happens to each, in order.

A fine-tuning script loads a model (`AutoModelForCausalLM.from_pretrained`, a
`LlamaForCausalLM(config)`, a project helper that returns one), wraps it with PEFT
(`get_peft_model`, `PeftModel.from_pretrained`, `model.add_adapter`), turns gradient
checkpointing on (`gradient_checkpointing_enable`, `prepare_model_for_kbit_training`,
`TrainingArguments(gradient_checkpointing=True)` handed to a `Trainer`), works around its
pitfalls (`enable_input_require_grads`, `config.use_cache = False`) and trains it. Whether
checkpointing is a bug depends on the order of those steps on one model object, so this
module follows model objects through the file and records their steps.

How: each *context* (the module's top-level code, each class's methods sharing `self.*`, each
function nothing in the file calls) is interpreted once, statement by statement in source
order, with an environment from names (`model`, `self.model`) to the objects they hold.
Branches are walked one after the other; steps remember which `if` branch they sit in and
what its condition requires, so `if lora:` ... `if not lora:` never meet. Calls to functions
and methods defined in the same file (also methods of objects of its classes) are
interpreted in place, with their parameters bound to the caller's objects, so a helper that
enables checkpointing or sets `use_cache` counts where it is called; functions that can
touch nothing followed here are skipped. A model handed to a function of another module of
the project is marked *escaped*; where it goes from there (and from a helper that returns it
to other modules) the rules ask the project model (`ckptlint.model.fates`). A model that a
project function of another module returns, or passes to a function of this file that
nothing here calls, gets its class and what was done to it from the project model too.
Names are resolved through libcst's qualified names.
"""

from __future__ import annotations

import enum
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

import libcst as cst
from libcst.metadata import QualifiedNameSource

from ckptlint.analysis.fsdp import absolute_names
from ckptlint.model.library import (
    EMBEDDING_PARTS,
    NOT_MODEL_NAME,
    GET_PEFT_MODEL,
    PREPARE_FOR_KBIT,
    SAME_MODEL_FUNCTIONS,
    SAME_MODEL_METHODS,
    TRAINING_ARGUMENTS_CLASSES,
    TRANSFORMERS_TRAINERS,
    is_model_class_name,
)
from ckptlint.analysis.huggingface import (
    GC_ENABLE,
    GC_KWARGS,
    HfCheckpointingKwargs,
    KwargsShape,
    keyword_value,
)
from ckptlint.model.names import module_name
from ckptlint.rule import Replacement

if TYPE_CHECKING:
    from ckptlint.rule import FileContext


# --- model classes -----------------------------------------------------------------------


class MainInput(str, enum.Enum):
    """A model's `main_input_name`, as far as transformers' input-grads logic cares."""

    INPUT_IDS = "input_ids"
    OTHER = "not input_ids"  # pixel_values, input_features, input_values...
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ModelClass:
    """What a model's class says about it."""

    name: str  # as resolved (`transformers.AutoModelForCausalLM`), or as written
    generative: bool | None  # decodes with a KV cache (decoder or encoder-decoder)
    main_input: MainInput

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


# Generative heads: a decoder (or encoder-decoder) that builds a KV cache when `use_cache`.
_GENERATIVE_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel", "ForSeq2SeqLM", "ForSpeechSeq2Seq")
_GENERATIVE_AUTO = frozenset(
    {
        "AutoModelForCausalLM", "AutoModelForSeq2SeqLM", "AutoModelForVision2Seq", "AutoModelForImageTextToText",
        "AutoModelForSpeechSeq2Seq", "AutoPeftModelForCausalLM", "AutoPeftModelForSeq2SeqLM",
    }
)
# LM heads whose configs have no `use_cache` (XLNet has `use_mems`): no KV cache to turn off.
_NO_CACHE_PREFIXES = ("XLNet", "OpenAIGPT", "XLM", "Flaubert")
# Heads and towers whose `main_input_name` is not `input_ids` (checked against transformers'
# own classes in tests/test_hf_rules.py); the exceptions are text models with such heads.
# Not AutoModelForSpeechSeq2Seq: half of what it maps to in 5.17 (Voxtral, Granite Speech...)
# takes `input_ids`.
_OTHER_INPUT_SUFFIXES = (
    "ForImageClassification", "ForSemanticSegmentation", "ForObjectDetection", "ForDepthEstimation", "ForCTC",
    "ForAudioClassification", "ForMaskedImageModeling", "ForVideoClassification", "ForUniversalSegmentation",
    "ForInstanceSegmentation", "ForKeypointDetection", "Backbone", "ForAudioFrameClassification", "ForXVector",
    "ForImageSegmentation", "ForImageSuperResolution",
)
_TEXT_WITH_IMAGE_HEADS = ("ImageGPT", "ShieldGemma2", "OwlViT", "Owlv2")
_OTHER_INPUT_FAMILIES = re.compile(
    r"^(ViT(?!s)|ViTMAE|ViTMSN|Deit|DeiT|Beit|BEiT|Swin|Swinv2|ConvNext|ConvNextV2|Dinov2|CLIPVision|SiglipVision|"
    r"Siglip2Vision|Whisper(?!ForCausalLM)|Wav2Vec2|Hubert|WavLM|Speech2Text(?!ForCausalLM))"
)
_OTHER_INPUT_AUTO = frozenset(
    {
        "AutoModelForImageClassification", "AutoModelForSemanticSegmentation", "AutoModelForObjectDetection",
        "AutoModelForDepthEstimation", "AutoModelForCTC", "AutoModelForAudioClassification",
        "AutoModelForVideoClassification", "AutoModelForMaskedImageModeling",
        "AutoModelForImageSegmentation", "AutoModelForInstanceSegmentation", "AutoModelForUniversalSegmentation",
        "AutoModelForKeypointDetection", "AutoModelForAudioFrameClassification", "AutoModelForAudioXVector",
        "AutoBackbone",
    }
)
_INPUT_IDS_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice")


def classify_model_class(name: str, *, main_input_name: str | None = None) -> ModelClass:
    """A model class by its (qualified) name; `main_input_name` when its class body says."""
    short = name.rsplit(".", 1)[-1]
    if short in _GENERATIVE_AUTO:
        generative: bool | None = True
    elif short.endswith(_GENERATIVE_SUFFIXES):
        generative = not short.startswith(_NO_CACHE_PREFIXES)
    elif short.startswith("Auto") and short.endswith("Model"):
        generative = None  # AutoModel / AutoPeftModel: any architecture, decoders included
    else:
        generative = None if short.endswith("Model") else False
    if main_input_name is not None:
        main_input = MainInput.INPUT_IDS if main_input_name == "input_ids" else MainInput.OTHER
    elif short in _OTHER_INPUT_AUTO or (
        (short.endswith(_OTHER_INPUT_SUFFIXES) or _OTHER_INPUT_FAMILIES.match(short))
        and not short.startswith(_TEXT_WITH_IMAGE_HEADS)
    ):
        main_input = MainInput.OTHER
    elif short.endswith(_INPUT_IDS_SUFFIXES) or short in ("AutoModelForCausalLM", "AutoPeftModelForCausalLM"):
        main_input = MainInput.INPUT_IDS
    else:
        main_input = MainInput.UNKNOWN
    return ModelClass(name, generative, main_input)


# --- library names -------------------------------------------------------------------------

ADAPTER_METHODS = frozenset({"add_adapter", "load_adapter"})
# Methods of other objects that hand back the models given to them, wrapped (accelerate's
# `prepare`, Lightning Fabric's `setup`).
WRAPPING_METHODS = frozenset({"prepare", "prepare_model", "unwrap_model", "setup", "setup_module"})
_LIBRARY_ROOTS = ("transformers", "peft", "trl", "torch", "accelerate", "diffusers")


class TrainerKind(str, enum.Enum):
    TRANSFORMERS = "transformers"  # transformers' Trainer (and the project's subclasses)
    TRL = "trl"  # TRL's trainers: whether they prepare PEFT models depends on the TRL version
    OTHER = "other"


# --- steps ---------------------------------------------------------------------------------


class StepKind(str, enum.Enum):
    PEFT_WRAPPED = "get_peft_model"  # a PeftModel built around it (PeftModel.__init__ ran)
    ADAPTER_ADDED = "add_adapter"  # transformers' PEFT integration (`_hf_peft_config_loaded`)
    GC_ENABLED = "gradient_checkpointing_enable"
    KBIT_PREPARED = "prepare_model_for_kbit_training"
    INPUT_GRADS = "input grads enabled"  # enable_input_require_grads, embeddings requires_grad_ / hook
    USE_CACHE_OFF = "use_cache turned off"  # or possibly off: a value only known at runtime
    TRAINER = "handed to a trainer"
    ESCAPED = "handed to code not visible here"


Branches = tuple[tuple[int, int], ...]  # (id of an `if` / `match`, branch index), outermost first
# What the enclosing `if`s require, as (condition source, required truth): `if a and not b:`
# gives ("a", True), ("b", False); `x != "full"` gives ('x == "full"', False).
Conditions = tuple[tuple[str, bool], ...]


@dataclass(frozen=True)
class ModelStep:
    kind: StepKind
    order: int  # interpretation order; helpers' steps are ordered where they are called
    node: cst.CSTNode  # the call (or assignment) that did it
    branches: Branches = ()
    conditions: Conditions = ()
    # The statement holding `node`, when a line can be inserted before or after it (a simple
    # statement line of an indented block or of the module).
    statement: cst.SimpleStatementLine | None = None
    subject: cst.BaseExpression | None = None  # how the code names the model there
    kwargs: HfCheckpointingKwargs | None = None  # GC_ENABLED, KBIT_PREPARED, TRAINER
    enables_checkpointing: bool | None = None  # KBIT_PREPARED / TRAINER: known to turn it on
    trainer: TrainerKind | None = None  # TRAINER
    arguments: cst.Call | None = None  # TRAINER: the `TrainingArguments(...)` call, if known
    # The function it happens in, named as the project model names it (`pkg.train.main`,
    # `pkg.train.<module>`): where `ProjectIndex.model_fate` follows the model on from.
    function: str = ""

    def exclusive_with(self, other: ModelStep) -> bool:
        """Whether the two steps can never both run: different branches of one `if`, or
        conditions that contradict each other (`if a and not b:` ... `if b:`)."""
        mine = dict(self.branches)
        if any(node in mine and mine[node] != index for node, index in other.branches):
            return True
        required = dict(self.conditions)
        return any(atom in required and required[atom] != truth for atom, truth in other.conditions)


@dataclass(frozen=True)
class ModelHistory:
    """One model object of one context and its steps, in order."""

    model_class: ModelClass | None  # None: created by code whose class is not known
    quantized: bool | None  # loaded in 4/8 bit (None: cannot tell)
    steps: tuple[ModelStep, ...]
    # The order at which its context starts a manual training loop (the first `.backward(`,
    # or Lightning's `training_step`); None when the context does not train.
    training_starts: int | None
    remote_code: bool = False  # loaded with `trust_remote_code=True`

    @property
    def trained_here(self) -> bool:
        return self.training_starts is not None

    def escaped_before(self, order: int) -> bool:
        """Whether code not visible here got the model before `order` (and may have
        prepared it)."""
        return any(step.kind is StepKind.ESCAPED and step.order <= order for step in self.steps)

    def of_kind(self, *kinds: StepKind) -> list[ModelStep]:
        return [step for step in self.steps if step.kind in kinds]

    def has(self, *kinds: StepKind) -> bool:
        return any(step.kind in kinds for step in self.steps)


@dataclass(frozen=True)
class ScriptModels:
    histories: tuple[ModelHistory, ...]


# --- interpretation: values ---------------------------------------------------------------


class _Context:
    def __init__(self) -> None:
        # Steps up to this order happened before the first training step of the context.
        self.training_starts: int | None = None

    def start_training(self, order: int) -> None:
        if self.training_starts is None:
            self.training_starts = order


class _ModelObject:
    def __init__(self, model_class: ModelClass | None, quantized: bool | None, context: _Context) -> None:
        self.model_class = model_class
        self.quantized = quantized
        self.context = context
        self.steps: list[ModelStep] = []
        self.origin: object = None  # ReturnedModel: returned by a project function of another module
        self.remote_code = False  # loaded with `trust_remote_code=True`: the Hub's code is the model


@dataclass(frozen=True)
class _Part:
    """A model object, or an attribute / method result of it (`model.config`,
    `model.get_input_embeddings()`): every part shares the model's layers and config."""

    model: _ModelObject
    path: tuple[str, ...] = ()

    def child(self, name: str) -> _Part:
        return _Part(self.model, self.path + (name,))

    @property
    def is_embedding(self) -> bool:
        return any(EMBEDDING_PARTS.search(name) for name in self.path)


class _Config:
    """A `PretrainedConfig` built in the script; its `use_cache` as far as it is set."""

    def __init__(self, use_cache_off: bool | None) -> None:
        self.use_cache_off = use_cache_off  # None: not known (e.g. `**kwargs`)
        self.models: list[_ModelObject] = []


class _TrainingArguments:
    def __init__(self, node: cst.Call, enables: bool | None, kwargs: HfCheckpointingKwargs) -> None:
        self.node = node
        self.enables = enables
        self.kwargs = kwargs


class _Dict:
    """A dict literal (or `dict(...)`) bound to a name: its string keys, while known."""

    def __init__(self, expression: cst.BaseExpression | None, keys: dict[str, cst.BaseExpression] | None) -> None:
        self.expression = expression  # None once it was changed after being built
        self.keys = keys  # None: not known


@dataclass(frozen=True)
class _Tuple:
    items: tuple


class _Instance:
    """An object of a class defined in this file (a trainer class, a model wrapper, a
    helper class): its `self.*` names, shared by the methods run on it."""

    def __init__(self, class_name: str) -> None:
        self.class_name = class_name
        self.attributes: dict[str, _Value] = {}


_Value = Union[_Part, _Config, _TrainingArguments, _Dict, _Tuple, _Instance, None]


class _Frame:
    def __init__(
        self,
        context: _Context,
        shared: dict[str, _Value] | None = None,
        class_name: str | None = None,
        branches: Branches = (),
        stack: tuple[cst.FunctionDef, ...] = (),
        module_names: dict[str, _Value] | None = None,
    ) -> None:
        self.context = context
        self.locals: dict[str, _Value] = {}
        # The module's names, read by functions that do not bind them (`global` semantics
        # are not modelled: functions do not rebind module names here).
        self.module_names = module_names
        self.shared = shared  # `self.*` of a class context, across its methods
        self.class_name = class_name  # qualified name of the class whose `self` this is
        self.branches = branches
        self.conditions: Conditions = ()
        self.stack = stack
        self.returns: list[_Value] = []
        self.statement: cst.SimpleStatementLine | None = None  # insertable statement being run

    def _table(self, name: str) -> dict[str, _Value]:
        if self.shared is not None and name.startswith("self."):
            return self.shared
        return self.locals

    def lookup(self, name: str) -> _Value:
        table = self._table(name)
        if name in table:
            return table[name]
        if self.module_names is not None and table is self.locals:
            return self.module_names.get(name)
        return None

    def bind(self, name: str, value: _Value) -> None:
        table = self._table(name)
        # Rebinding `model` also forgets what was bound under `model.*`.
        for key in [key for key in table if key.startswith(name + ".")]:
            del table[key]
        if value is None:
            table.pop(name, None)
        else:
            table[name] = value


# --- interpretation ---------------------------------------------------------------------------


_MAX_INLINE_DEPTH = 8


class _Interpreter:
    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.module = context.module
        self.order = 0
        self.objects: list[_ModelObject] = []
        self.functions: dict[str, cst.FunctionDef] = {}
        self.classes: dict[str, cst.ClassDef] = {}
        self.class_of_function: dict[cst.FunctionDef, str] = {}
        self.main_input_names: dict[str, str] = {}  # same-file model classes that declare it
        self.called: set[cst.FunctionDef] = set()
        self.function_facts: dict[cst.FunctionDef, _FunctionFacts] = {}
        self.ran: set[cst.FunctionDef] = set()
        self.insertable: set[cst.SimpleStatementLine] = set()
        self._project_modules: frozenset[str] | None = None
        self.module_names: dict[str, _Value] = {}
        self._names: dict[cst.CSTNode, set[str]] = {}
        self.module_name = module_name(context.relative_path)
        self.project_names: dict[cst.FunctionDef, str] = {}  # as the project model names functions
        self._collect_definitions()

    # --- definitions -------------------------------------------------------------------

    def _collect_definitions(self) -> None:
        interpreter = self

        class Collector(cst.CSTVisitor):
            def __init__(self) -> None:
                self.scope: list[str] = []
                self.classes: list[str | None] = [None]  # the class whose body is being visited
                self.self_classes: list[str | None] = [None]  # the class `self` refers to
                self.functions: list[cst.FunctionDef] = []  # enclosing functions, innermost last
                self.calls: list[tuple[cst.Call, str | None, tuple[cst.FunctionDef, ...]]] = []

            def visit_Module(self, node: cst.Module) -> None:
                interpreter._note_insertable(node.body)

            def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
                interpreter._note_insertable(node.body)

            def visit_ClassDef(self, node: cst.ClassDef) -> None:
                name = ".".join([*self.scope, node.name.value])
                interpreter.classes[name] = node
                for statement in _body(node):
                    if isinstance(statement, cst.SimpleStatementLine):
                        for small in statement.body:
                            if (
                                isinstance(small, cst.Assign)
                                and any(isinstance(t.target, cst.Name) and t.target.value == "main_input_name" for t in small.targets)
                                and isinstance(small.value, cst.SimpleString)
                            ):
                                interpreter.main_input_names[name] = str(small.value.evaluated_value)
                self.scope.append(node.name.value)
                self.classes.append(name)

            def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
                self.scope.pop()
                self.classes.pop()

            def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
                name = ".".join([*self.scope, node.name.value])
                interpreter.functions[name] = node
                # A method's `self` is its class; a function nested in a method shares it.
                if self.classes[-1] is not None and self.scope and self.scope[-1] == self.classes[-1].rsplit(".", 1)[-1]:
                    interpreter.class_of_function[node] = self.classes[-1]
                    self.self_classes.append(self.classes[-1])
                else:
                    self.self_classes.append(self.self_classes[-1])
                interpreter.function_facts[node] = _FunctionFacts()
                interpreter.project_names[node] = f"{interpreter.module_name}.{name}".replace(".<locals>", "")
                self.functions.append(node)
                self.scope.extend([node.name.value, "<locals>"])
                self.classes.append(None)

            def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
                del self.scope[-2:]
                self.classes.pop()
                self.functions.pop()
                self.self_classes.pop()

            def visit_Call(self, node: cst.Call) -> None:
                func = node.func
                if isinstance(func, cst.Name) or (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name)):
                    self.calls.append((node, self.self_classes[-1], tuple(self.functions)))

            def visit_Name(self, node: cst.Name) -> None:
                for function in self.functions:
                    facts = interpreter.function_facts[function]
                    facts.reads.add(node.value)
                    facts.relevant = facts.relevant or bool(_RELEVANT_IDENTIFIER.search(node.value))

            def visit_Attribute(self, node: cst.Attribute) -> None:
                if node.attr.value == GC_ENABLE:
                    for function in self.functions:
                        interpreter.function_facts[function].enables = True
                if isinstance(node.value, cst.Name) and node.value.value == "self":
                    for function in self.functions:
                        interpreter.function_facts[function].reads.add(f"self.{node.attr.value}")

        collector = Collector()
        self.module.visit(collector)
        # Calls resolved once every definition is known, and only those that may name one.
        defined = {name.rsplit(".", 1)[-1] for name in self.functions}
        for call, self_class, callers in collector.calls:
            short = call.func.value if isinstance(call.func, cst.Name) else call.func.attr.value
            target = self._local_function(call, self_class) if short in defined else None
            if target is not None:
                self.called.add(target)
                for caller in callers:
                    self.function_facts[caller].callees.add(target)
        _close_over_callees(self.function_facts)

    def _note_insertable(self, body: Sequence[cst.BaseStatement]) -> None:
        for statement in body:
            if isinstance(statement, cst.SimpleStatementLine):
                self.insertable.add(statement)

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
        if qualified.source is not QualifiedNameSource.LOCAL:
            return None
        return self.functions.get(qualified.name)

    # --- contexts ----------------------------------------------------------------------

    def run(self) -> ScriptModels:
        module_frame = _Frame(_Context())
        self.module_names = module_frame.locals
        self._run_block(self.module.body, module_frame)
        for class_name, node in self.classes.items():
            methods = [s for s in _body(node) if isinstance(s, cst.FunctionDef)]
            if not methods:
                continue
            context = _Context()
            shared: dict[str, _Value] = {}
            lightning = any("LightningModule" in _code(base.value) for base in node.bases)
            for method in sorted(methods, key=lambda m: m.name.value != "__init__"):
                if lightning and method.name.value == "training_step":  # Lightning runs the loop
                    context.start_training(self.order)
                if method not in self.called:
                    frame = _Frame(context, shared, class_name, module_names=self.module_names)
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
            ModelHistory(obj.model_class, obj.quantized, tuple(obj.steps), obj.context.training_starts, obj.remote_code)
            for obj in self.objects
            if obj.steps
        )
        return ScriptModels(histories)

    def _run_entry(self, function: cst.FunctionDef) -> None:
        frame = _Frame(_Context(), module_names=self.module_names)
        passed = self._passed_models(function, frame) if self.function_facts[function].enables else {}
        if passed or self._may_matter(function, frame, []):
            self._run_function(function, frame, [], passed)

    def _passed_models(self, function: cst.FunctionDef, frame: _Frame) -> dict[str, _Value]:
        """For a function nothing in this file calls that turns checkpointing on
        (`def enable_gc(model): model.gradient_checkpointing_enable()`): the models the
        project's other modules pass it, by parameter, where they all are of one class."""
        found: dict[str, _Value] = {}
        for param in [*function.params.posonly_params, *function.params.params, *function.params.kwonly_params]:
            passed = self.context.project.passed_models(self.project_names[function], param.name.value)
            classes = {origin.model_class for origin, _ in passed}
            if len(classes) != 1:
                continue
            origin = passed[0][0]
            obj = _ModelObject(classify_model_class(origin.model_class), origin.quantized, frame.context)
            obj.origin = origin
            self.objects.append(obj)
            found[param.name.value] = _Part(obj)
        return found

    def _run_function(self, function: cst.FunctionDef, frame: _Frame, args: list[_Value], kwargs: dict[str, _Value]) -> None:
        self.ran.add(function)
        params = [*function.params.posonly_params, *function.params.params]
        if function in self.class_of_function and params and params[0].name.value in ("self", "cls"):
            params = params[1:]
        for param, value in zip(params, args):
            frame.bind(param.name.value, value)
        for param in [*params, *function.params.kwonly_params]:
            if param.name.value in kwargs:
                frame.bind(param.name.value, kwargs[param.name.value])
        frame.stack = (*frame.stack, function)
        self._run_block(_body(function), frame)

    # --- statements --------------------------------------------------------------------

    def _run_block(self, body: Sequence[cst.CSTNode], frame: _Frame) -> None:
        for statement in body:
            self._run_statement(statement, frame)

    def _run_statement(self, statement: cst.CSTNode, frame: _Frame) -> None:
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
            self._run_branch(statement.body, frame, (id(statement), 0), condition_literals(statement.test, True))
            if statement.orelse is not None:
                orelse = statement.orelse
                self._run_branch(
                    orelse if isinstance(orelse, cst.If) else orelse.body,
                    frame,
                    (id(statement), 1),
                    condition_literals(statement.test, False),
                )
        elif isinstance(statement, (cst.For, cst.While)):
            if isinstance(statement, cst.For):
                iterated = self._eval(statement.iter, frame)
                self._bind_target(statement.target, iterated.child("[]") if isinstance(iterated, _Part) else None, frame)
            else:
                self._eval(statement.test, frame)
            self._run_block(_body(statement), frame)
            if statement.orelse is not None:
                self._run_block(_body(statement.orelse), frame)
        elif isinstance(statement, cst.With):
            for item in statement.items:
                value = self._eval(item.item, frame)
                if item.asname is not None:
                    self._bind_target(item.asname.name, value, frame)
            self._run_block(_body(statement), frame)
        elif isinstance(statement, cst.Try) or type(statement).__name__ == "TryStar":
            self._run_block(_body(statement), frame)
            for handler in statement.handlers:
                self._run_block(_body(handler), frame)
            for extra in (statement.orelse, statement.finalbody):
                if extra is not None:
                    self._run_block(_body(extra), frame)
        elif isinstance(statement, cst.Match):
            self._eval(statement.subject, frame)
            for index, case in enumerate(statement.cases):
                self._run_branch(case.body, frame, (id(statement), index), ())
        elif isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            return  # run when called (or as a context of its own)

    def _run_branch(self, body: cst.CSTNode, frame: _Frame, branch: tuple[int, int], conditions: Conditions) -> None:
        outer_branches, outer_conditions = frame.branches, frame.conditions
        frame.branches = (*outer_branches, branch)
        frame.conditions = (*outer_conditions, *conditions)
        if isinstance(body, cst.If):
            self._run_statement(body, frame)
        else:
            self._run_block(_body(body), frame)
        frame.branches, frame.conditions = outer_branches, outer_conditions

    def _run_small(self, small: cst.BaseSmallStatement, frame: _Frame) -> None:
        if isinstance(small, cst.Assign):
            value = self._eval(small.value, frame)
            for target in small.targets:
                self._assign(target.target, value, small.value, small, frame)
        elif isinstance(small, cst.AnnAssign):
            if small.value is not None:
                self._assign(small.target, self._eval(small.value, frame), small.value, small, frame)
        elif isinstance(small, cst.AugAssign):
            self._eval(small.value, frame)
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
        value: _Value,
        value_node: cst.BaseExpression,
        node: cst.CSTNode,
        frame: _Frame,
    ) -> None:
        if isinstance(target, cst.Attribute):
            owner = self._eval(target.value, frame)
            name = target.attr.value
            if isinstance(owner, _Part):
                self._assign_model_attribute(owner, name, value_node, node, frame)
                return
            if isinstance(owner, _Config):
                if name == "use_cache":
                    self._config_use_cache(owner, value_node, node, frame)
                return
            if isinstance(owner, _TrainingArguments):
                if name == "gradient_checkpointing":
                    owner.enables = _literal(value_node)
                elif name == GC_KWARGS:
                    owner.kwargs = HfCheckpointingKwargs.of(_dict_expression(value_node, frame), trainer_path=True)
                return
        if isinstance(target, cst.Subscript):
            owner = self._eval(target.value, frame)
            if isinstance(owner, _Dict):
                key = _subscript_key(target)
                owner.expression = None
                if owner.keys is not None and key is not None:
                    owner.keys[key] = value_node
                else:
                    owner.keys = None
            return
        self._bind_target(target, value, frame)

    def _bind_target(self, target: cst.BaseExpression, value: _Value, frame: _Frame) -> None:
        if isinstance(target, (cst.Tuple, cst.List)):
            items = value.items if isinstance(value, _Tuple) else ()
            elements = [e for e in target.elements if not isinstance(e, cst.StarredElement)]
            exact = len(elements) == len(target.elements) and len(items) == len(elements)
            for index, element in enumerate(elements):
                self._bind_target(element.value, items[index] if exact else None, frame)
            return
        name = _dotted(target)
        if name is not None:
            frame.bind(name, value)

    def _assign_model_attribute(self, part: _Part, name: str, value: cst.BaseExpression, node: cst.CSTNode, frame: _Frame) -> None:
        if name == "use_cache" and "generation_config" not in part.path:
            if not _is_true(value):
                self._step(part, StepKind.USE_CACHE_OFF, node, frame)
        elif name == "requires_grad" and part.is_embedding and not _is_false(value):
            self._step(part, StepKind.INPUT_GRADS, node, frame)

    def _config_use_cache(
        self, config: _Config, value: cst.BaseExpression | None, node: cst.CSTNode, frame: _Frame
    ) -> None:
        """`config.use_cache = value` (None: a value not known here)."""
        if value is not None and _is_true(value):
            return
        if config.use_cache_off is not True:
            config.use_cache_off = True if value is not None else None
        for model in config.models:
            self._step(_Part(model), StepKind.USE_CACHE_OFF, node, frame)

    # --- expressions -------------------------------------------------------------------

    def _eval(self, expr: cst.BaseExpression, frame: _Frame) -> _Value:
        if isinstance(expr, cst.Name):
            return frame.lookup(expr.value)
        if isinstance(expr, cst.Attribute):
            name = _dotted(expr)
            if name is not None:
                found = frame.lookup(name)
                if found is not None:
                    return found
            owner = self._eval(expr.value, frame)
            return owner.child(expr.attr.value) if isinstance(owner, _Part) else None
        if isinstance(expr, cst.Call):
            return self._call(expr, frame)
        if isinstance(expr, (cst.Tuple, cst.List)):
            items = tuple(self._eval(e.value, frame) for e in expr.elements)
            return _Tuple(items) if isinstance(expr, cst.Tuple) else None
        if isinstance(expr, cst.Dict):
            self._eval_children(expr, frame)
            return _Dict(expr, _dict_keys(expr))
        if isinstance(expr, cst.IfExp):
            self._eval(expr.test, frame)
            body, orelse = self._eval(expr.body, frame), self._eval(expr.orelse, frame)
            return body if _same(body, orelse) else None
        if isinstance(expr, cst.Subscript):
            owner = self._eval(expr.value, frame)
            for element in expr.slice:
                self._eval_children(element, frame)
            return owner.child("[]") if isinstance(owner, _Part) else None
        if isinstance(expr, cst.NamedExpr):
            value = self._eval(expr.value, frame)
            self._bind_target(expr.target, value, frame)
            return value
        if isinstance(expr, cst.Lambda):
            return None  # runs later, if ever
        self._eval_children(expr, frame)
        return None

    def _eval_children(self, node: cst.CSTNode, frame: _Frame) -> None:
        for child in node.children:
            if isinstance(child, (cst.Lambda, cst.FunctionDef, cst.ClassDef)):
                continue
            if isinstance(child, cst.BaseExpression):
                self._eval(child, frame)
            else:
                self._eval_children(child, frame)

    # --- calls -------------------------------------------------------------------------

    def _call(self, call: cst.Call, frame: _Frame) -> _Value:
        func = call.func
        receiver = self._eval(func.value, frame) if isinstance(func, cst.Attribute) else None
        callee = receiver.child(func.attr.value) if isinstance(receiver, _Part) else None
        if callee is None and not isinstance(func, cst.Attribute):
            callee_value = self._eval(func, frame)
            callee = callee_value if isinstance(callee_value, _Part) else None
        elif callee is None and isinstance(func, cst.Attribute) and receiver is None:
            found = frame.lookup(_dotted(func) or "")
            callee = found if isinstance(found, _Part) else None
        args = [self._eval(arg.value, frame) for arg in call.args]
        method = func.attr.value if isinstance(func, cst.Attribute) else None
        if method == "backward":
            frame.context.start_training(self.order)

        if isinstance(receiver, _Part) and method is not None:
            return self._model_method(call, receiver, method, args, frame)
        if isinstance(callee, _Part):
            self._forward_call(call, callee, args, frame)
            return None
        if isinstance(receiver, _Config) and method == "update":
            keys = _dict_keys(call.args[0].value) if len(call.args) == 1 and not call.args[0].keyword else None
            if keys is None or "use_cache" in keys:
                # An update whose keys are not known may turn it off too.
                self._config_use_cache(receiver, keys["use_cache"] if keys is not None else None, call, frame)
            return None
        if isinstance(receiver, _Dict) and method not in ("get", "items", "keys", "values", "copy"):
            receiver.expression, receiver.keys = None, None
            return None
        if isinstance(receiver, _Instance) and method is not None:
            found = self._method(receiver.class_name, method)
            return self._inline(call, found, args, frame, receiver) if found is not None else None
        called = self._eval(func, frame) if not isinstance(func, cst.Attribute) else frame.lookup(_dotted(func) or "")
        if isinstance(called, _Instance):
            found = self._method(called.class_name, "forward") or self._method(called.class_name, "__call__")
            return self._inline(call, found, args, frame, called) if found is not None else None

        local = self._local_function(call, frame.class_name)
        if local is not None:
            return self._inline(call, local, args, frame)
        if isinstance(func, cst.Name) and func.value == "setattr" and len(call.args) >= 3:
            self._setattr(call, args, frame)
            return None
        if isinstance(func, cst.Name) and func.value == "dict" and not any(a.star for a in call.args):
            return _Dict(call, {a.keyword.value: a.value for a in call.args if a.keyword is not None})
        names = self._absolute_names(func)
        if names:
            handled, value = self._library_call(call, names, args, frame)
            if handled:
                return value
        if method in WRAPPING_METHODS and receiver is None:
            # accelerate / Fabric: `model, optimizer = accelerator.prepare(model, optimizer)`.
            return args[0] if len(args) == 1 else _Tuple(tuple(args))
        if method == "from_pretrained" and receiver is None and _may_load_a_model(names):
            # `text_encoder_cls.from_pretrained(...)`: a class chosen at runtime.
            return self._new_model(None, call, frame)
        if self._is_project_call(func):
            for value in args:
                for part in _parts(value):
                    self._step(part, StepKind.ESCAPED, call, frame)
            return self._returned_model(call, names, frame)
        local_classes = [self._local_name(name) for name in names]
        if len(local_classes) == 1 and local_classes[0] in self.classes:
            return self._instantiate(call, local_classes[0], args, frame)
        return None

    def _local_name(self, name: str) -> str:
        """A name defined in this file, without the module prefix."""
        return name.removeprefix(module_name(self.context.relative_path) + ".")

    def _method(self, class_name: str, method: str, _seen: frozenset[str] = frozenset()) -> cst.FunctionDef | None:
        """A method of a class of this file, also inherited from a base class of this file."""
        found = self.functions.get(f"{class_name}.{method}")
        if found is not None or class_name in _seen or class_name not in self.classes:
            return found
        for base in self.classes[class_name].bases:
            for name in self._absolute_names(base.value):
                inherited = self._method(self._local_name(name), method, _seen | {class_name})
                if inherited is not None:
                    return inherited
        return None

    def _instantiate(self, call: cst.Call, class_name: str, args: list[_Value], frame: _Frame) -> _Instance:
        """`Helper(model)` for a class of this file: its `__init__` runs on a new object."""
        instance = _Instance(class_name)
        init = self._method(class_name, "__init__")
        if init is not None:
            self._inline(call, init, args, frame, instance)
        return instance

    def _model_method(self, call: cst.Call, part: _Part, method: str, args: list[_Value], frame: _Frame) -> _Value:
        subject = call.func.value if isinstance(call.func, cst.Attribute) else None
        if method == GC_ENABLE:
            kwargs = _gc_enable_kwargs(call, frame)
            self._step(part, StepKind.GC_ENABLED, call, frame, subject=subject, kwargs=kwargs)
        elif method == "enable_input_require_grads":
            self._step(part, StepKind.INPUT_GRADS, call, frame)
        elif method in ADAPTER_METHODS:
            self._step(part, StepKind.ADAPTER_ADDED, call, frame)
        elif method == "requires_grad_":
            flag = call.args[0].value if call.args else None
            if (part.is_embedding or not part.path) and (flag is None or not _is_false(flag)):
                self._step(part, StepKind.INPUT_GRADS, call, frame)
        elif method == "register_forward_hook" and part.is_embedding:
            if not call.args or self._hook_may_set_requires_grad(call.args[0].value):
                self._step(part, StepKind.INPUT_GRADS, call, frame)
        elif method in ("forward", "__call__", "module", "base_model", "model"):
            self._forward_call(call, part, args, frame)
        elif method == "update" and part.path and part.path[-1] == "config":
            keys = _dict_keys(call.args[0].value) if len(call.args) == 1 and not call.args[0].keyword else None
            if keys is None or ("use_cache" in keys and not _is_true(keys["use_cache"])):
                self._step(part, StepKind.USE_CACHE_OFF, call, frame)
        if method in SAME_MODEL_METHODS:
            return part
        if method in ("merge_and_unload", "unload"):
            return None  # the base model without its adapters: a different story
        if method == "get_input_embeddings":
            return part.child(method)
        return part.child(method + "()")

    def _forward_call(self, call: cst.Call, part: _Part, args: list[_Value], frame: _Frame) -> None:
        """A forward pass: `use_cache=False` (or a runtime value) there turns the cache off."""
        use_cache = keyword_value(call, "use_cache")
        if use_cache is not None and not _is_true(use_cache):
            self._step(part, StepKind.USE_CACHE_OFF, call, frame)
        for arg, value in zip(call.args, args):
            if arg.star == "**" and isinstance(value, _Dict) and value.keys is not None and "use_cache" in value.keys:
                if not _is_true(value.keys["use_cache"]):
                    self._step(part, StepKind.USE_CACHE_OFF, call, frame)

    def _setattr(self, call: cst.Call, args: list[_Value], frame: _Frame) -> None:
        owner, attribute, value = args[0], call.args[1].value, call.args[2].value
        if not isinstance(attribute, cst.SimpleString) or attribute.evaluated_value != "use_cache":
            return
        if isinstance(owner, _Part):
            self._assign_model_attribute(owner, "use_cache", value, call, frame)
        elif isinstance(owner, _Config):
            self._config_use_cache(owner, value, call, frame)

    def _hook_may_set_requires_grad(self, hook: cst.BaseExpression) -> bool:
        """A forward hook that sets `requires_grad` on the output (or one not visible here)."""
        body: cst.CSTNode | None = hook.body if isinstance(hook, cst.Lambda) else None
        if isinstance(hook, cst.Name):
            names = self.context.qualified_names(hook)
            local = [self.functions.get(q.name) for q in names if q.source is QualifiedNameSource.LOCAL]
            if len(local) != 1 or local[0] is None:
                return True
            body = local[0]
        if body is None:
            return True
        return "requires_grad" in _code(body)

    def _may_matter(self, function: cst.FunctionDef, frame: _Frame, args: list[_Value]) -> bool:
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
        call: cst.Call,
        function: cst.FunctionDef,
        args: list[_Value],
        frame: _Frame,
        instance: _Instance | None = None,
    ) -> _Value:
        """Run a function of this file where it is called: `instance` is the object a method
        runs on (by default the caller's `self` for its own class's methods)."""
        if function in frame.stack or len(frame.stack) >= _MAX_INLINE_DEPTH:
            return None
        positional = [value for arg, value in zip(call.args, args) if arg.keyword is None and not arg.star]
        keywords = {arg.keyword.value: value for arg, value in zip(call.args, args) if arg.keyword is not None}
        class_name = self.class_of_function.get(function)
        if instance is not None:
            shared, class_name = instance.attributes, instance.class_name
        elif class_name is not None and class_name == frame.class_name:
            shared = frame.shared
        elif class_name is not None:
            shared = {}  # a static or class method called on its class: no `self` of the caller's
        else:
            shared = None
        inner = _Frame(frame.context, shared, class_name, frame.branches, frame.stack, self.module_names)
        inner.conditions = frame.conditions
        if not self._may_matter(function, inner, args):
            self.ran.add(function)
            return None
        self._run_function(function, inner, positional, keywords)
        return _merge(inner.returns)

    # --- library calls -----------------------------------------------------------------

    def _library_call(self, call: cst.Call, names: set[str], args: list[_Value], frame: _Frame) -> tuple[bool, _Value]:
        first = args[0] if args and call.args[0].keyword is None else None
        if names <= GET_PEFT_MODEL:
            model = first if isinstance(first, _Part) else _keyword_value(call, args, "model")
            if isinstance(model, _Part):
                self._step(model, StepKind.PEFT_WRAPPED, call, frame)
            return True, model
        if names <= PREPARE_FOR_KBIT:
            model = first if isinstance(first, _Part) else _keyword_value(call, args, "model")
            if isinstance(model, _Part):
                enables = keyword_value(call, "use_gradient_checkpointing")
                kwargs = keyword_value(call, GC_KWARGS)
                self._step(
                    model,
                    StepKind.KBIT_PREPARED,
                    call,
                    frame,
                    subject=call.args[0].value if first is not None else None,
                    kwargs=HfCheckpointingKwargs.of(_dict_expression(kwargs, frame)) if kwargs is not None else None,
                    enables_checkpointing=True if enables is None else _literal(enables),
                )
            return True, model
        if names <= SAME_MODEL_FUNCTIONS:
            return True, first if isinstance(first, _Part) else None
        if names == {"deepspeed.initialize"}:
            # `engine, optimizer, _, _ = deepspeed.initialize(model=model, ...)`: the engine
            # runs the model's forward.
            model = _keyword_value(call, args, "model")
            return True, _Tuple((model, None, None, None)) if isinstance(model, _Part) else None
        # Without `is_trainable=True` the adapters are loaded frozen, for inference.
        trainable = keyword_value(call, "is_trainable")
        trainable_adapters = trainable is not None and not _is_false(trainable)
        if all(_is_peft_model_loader(name) for name in names):
            model = first if isinstance(first, _Part) else _keyword_value(call, args, "model")
            if isinstance(model, _Part) and trainable_adapters:
                self._step(model, StepKind.PEFT_WRAPPED, call, frame)
            return True, model
        if all(_is_auto_peft_loader(name) for name in names):
            created = self._new_model(classify_model_class(next(iter(names)).rsplit(".", 1)[0]), call, frame)
            if trainable_adapters:
                self._step(created, StepKind.PEFT_WRAPPED, call, frame)
            return True, created
        if all(self._is_training_arguments(name) for name in names):
            return True, _training_arguments(call, frame)
        trainer = self._trainer_kind(names)
        if trainer is not None:
            self._trainer(call, args, trainer, frame)
            return True, None
        model_classes = {self._model_class_of(name) for name in names}
        if len(model_classes) == 1 and None not in model_classes:
            return True, self._new_model(model_classes.pop(), call, frame)
        if all(_is_config_class(name) for name in names):
            return True, _config(call, frame)
        return False, None

    def _model_class_of(self, name: str) -> ModelClass | None:
        """The model class a call creates an instance of (`X(...)`, `X.from_pretrained`)."""
        for suffix in (".from_pretrained", "._from_config", ".from_config"):
            if name.endswith(suffix):
                name = name[: -len(suffix)]
                break
        local = name.removeprefix(module_name(self.context.relative_path) + ".")
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
            for name in self._absolute_names(base.value):
                local = name.removeprefix(module_name(self.context.relative_path) + ".")
                if local in self.classes:
                    if self._is_pretrained_model_subclass(local, seen | {class_name}):
                        return True
                elif name.split(".", 1)[0] == "transformers" and (
                    name.endswith("PreTrainedModel") or is_model_class_name(name)
                ):
                    return True
        return False

    def _new_model(self, model_class: ModelClass | None, call: cst.Call, frame: _Frame) -> _Part:
        quantized = _quantized(call, frame)
        obj = _ModelObject(model_class, quantized, frame.context)
        remote = keyword_value(call, "trust_remote_code")
        obj.remote_code = remote is not None and not _is_false(remote)
        self.objects.append(obj)
        part = _Part(obj)
        use_cache = keyword_value(call, "use_cache")
        if use_cache is not None and not _is_true(use_cache):
            self._step(part, StepKind.USE_CACHE_OFF, call, frame)
        config_arg = keyword_value(call, "config")
        loads_weights = isinstance(call.func, cst.Attribute) and call.func.attr.value == "from_pretrained"
        if config_arg is None and call.args and call.args[0].keyword is None and not loads_weights:
            config_arg = call.args[0].value  # `LlamaForCausalLM(config)`, `from_config(config)`
        if config_arg is not None:
            config = self._eval(config_arg, frame)
            if isinstance(config, _Config):
                config.models.append(obj)
                if config.use_cache_off is not False:
                    self._step(part, StepKind.USE_CACHE_OFF, call, frame)
            else:
                self._step(part, StepKind.USE_CACHE_OFF, call, frame)  # a config not built here: unknown
        for arg in call.args:
            if arg.star == "**":
                value = self._eval(arg.value, frame)
                keys = value.keys if isinstance(value, _Dict) else None
                if keys is None or ("use_cache" in keys and not _is_true(keys["use_cache"])):
                    self._step(part, StepKind.USE_CACHE_OFF, call, frame)
        return part

    def _returned_model(self, call: cst.Call, names: set[str], frame: _Frame) -> _Value:
        """The model a project function of another module returns, as the project model
        knows it (`model = load_model(name)`): its class, and what the function did to it
        already. Checkpointing it enabled is that file's to report."""
        if len(names) != 1:
            return None
        returned = self.context.project.returned_model(next(iter(names)))
        if returned is None:
            return None
        obj = _ModelObject(classify_model_class(returned.model_class), returned.quantized, frame.context)
        obj.origin = returned
        self.objects.append(obj)
        part = _Part(obj)
        for done, kind in ((returned.cache_off, StepKind.USE_CACHE_OFF), (returned.input_grads, StepKind.INPUT_GRADS),
                           (returned.peft, StepKind.PEFT_WRAPPED)):
            if done:
                self._step(part, kind, call, frame)
        return part

    def _trainer(self, call: cst.Call, args: list[_Value], kind: TrainerKind, frame: _Frame) -> None:
        positional = [value for arg, value in zip(call.args, args) if arg.keyword is None and not arg.star]
        model = _keyword_value(call, args, "model")
        if model is None and positional:
            model = positional[0]
        if not isinstance(model, _Part):
            return
        training_arguments = _keyword_value(call, args, "args")
        if training_arguments is None and len(positional) > 1:
            training_arguments = positional[1]
        has_arguments = keyword_value(call, "args") is not None or len(positional) > 1 or any(a.star for a in call.args)
        if isinstance(training_arguments, _TrainingArguments):
            enables, kwargs, arguments = training_arguments.enables, training_arguments.kwargs, training_arguments.node
        elif not has_arguments:
            enables, kwargs, arguments = False, None, None  # the default TrainingArguments
        else:
            enables, kwargs, arguments = None, None, None
        model_arg = keyword_value(call, "model")
        if model_arg is None and call.args and call.args[0].keyword is None:
            model_arg = call.args[0].value
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

    def _trainer_kind(self, names: set[str]) -> TrainerKind | None:
        if not all(name.rsplit(".", 1)[-1].endswith("Trainer") for name in names):
            return None
        kinds = set()
        for name in names:
            lineage = set(self._ancestors(name))
            if any(n.startswith("trl.") for n in lineage):
                kinds.add(TrainerKind.TRL)
            elif lineage & TRANSFORMERS_TRAINERS:
                kinds.add(TrainerKind.TRANSFORMERS)
            else:
                kinds.add(TrainerKind.OTHER)
        return kinds.pop() if len(kinds) == 1 else TrainerKind.OTHER

    def _ancestors(self, name: str) -> list[str]:
        local = name.removeprefix(module_name(self.context.relative_path) + ".")
        if local in self.classes:
            found = [name]
            for base in self.classes[local].bases:
                for base_name in self._absolute_names(base.value):
                    if base_name != name:
                        found.extend(self._ancestors(base_name))
            return found
        return self.context.project.ancestors(name)

    def _is_training_arguments(self, name: str) -> bool:
        return name in TRAINING_ARGUMENTS_CLASSES or self.context.project.is_training_arguments(name)

    # --- names -------------------------------------------------------------------------

    def _absolute_names(self, expr: cst.BaseExpression) -> set[str]:
        if expr not in self._names:
            self._names[expr] = absolute_names(self.context, expr) if isinstance(expr, (cst.Name, cst.Attribute)) else set()
        return self._names[expr]

    def _is_project_call(self, func: cst.BaseExpression) -> bool:
        """A function imported from another module of the project: it may do anything to a
        model handed to it."""
        if not isinstance(func, (cst.Name, cst.Attribute)):
            return False
        names = self.context.qualified_names(func)
        if any(q.source is not QualifiedNameSource.IMPORT for q in names):
            return False  # a builtin, a local variable's method, a function of this file
        if any(q.name.startswith(".") for q in names):
            return True
        return any(self._is_project_name(name) for name in self._absolute_names(func))

    def _is_project_name(self, name: str) -> bool:
        if self._project_modules is None:
            modules: set[str] = set()
            for path in self.context.project.files:
                parts = module_name(path).split(".")
                modules.update(".".join(parts[: i + 1]) for i in range(len(parts)))
            modules.add(module_name(self.context.relative_path))
            self._project_modules = frozenset(modules)
        parts = name.split(".")
        if parts[0] in _LIBRARY_ROOTS:
            return False
        return any(".".join(parts[:i]) in self._project_modules for i in range(1, len(parts)))

    # --- steps -------------------------------------------------------------------------

    def _step(
        self,
        part: _Part,
        kind: StepKind,
        node: cst.CSTNode,
        frame: _Frame,
        **details,
    ) -> None:
        self.order += 1
        function = self.project_names[frame.stack[-1]] if frame.stack else f"{self.module_name}.<module>"
        part.model.steps.append(
            ModelStep(kind, self.order, node, frame.branches, frame.conditions, frame.statement, **details,
                      function=function)
        )


# --- helpers -------------------------------------------------------------------------------

# Identifiers that make a function worth interpreting even when it gets nothing followed.
_RELEVANT_IDENTIFIER = re.compile(
    r"^(backward|training_step|from_pretrained|from_config|_from_config|gradient_checkpointing\w*|"
    r"enable_input_require_grads|add_adapter|load_adapter|get_peft_model|prepare_model_for_\w+|use_cache|"
    r"requires_grad_?|register_forward_hook|setattr|dict)$|Peft|Trainer|Arguments|Config$|Model|For[A-Z]|Backbone$"
)


class _FunctionFacts:
    """Names a function reads and whether it mentions anything the analysis follows,
    including through the functions of the file it calls."""

    def __init__(self) -> None:
        self.reads: set[str] = set()
        self.relevant = False
        self.enables = False  # names `gradient_checkpointing_enable` / `prepare_model_for_kbit_training`
        self.callees: set[cst.FunctionDef] = set()


def _close_over_callees(facts: dict[cst.FunctionDef, _FunctionFacts]) -> None:
    changed = True
    while changed:
        changed = False
        for function_facts in facts.values():
            for callee in function_facts.callees:
                other = facts.get(callee)
                if other is None:
                    continue
                if other.relevant and not function_facts.relevant:
                    function_facts.relevant = changed = True
                if not other.reads <= function_facts.reads:
                    function_facts.reads |= other.reads
                    changed = True


def _body(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    body = getattr(node, "body", None)
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        return body.body
    if isinstance(body, Sequence):
        return body
    return ()


_COMPARISONS = {
    cst.Equal: ("==", True), cst.NotEqual: ("==", False), cst.Is: ("is", True), cst.IsNot: ("is", False),
    cst.In: ("in", True), cst.NotIn: ("in", False),
}


def condition_literals(test: cst.BaseExpression, truth: bool) -> Conditions:
    """What `test` being `truth` says, as a conjunction of (condition, truth) pairs."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return condition_literals(test.expression, not truth)
    if isinstance(test, cst.BooleanOperation):
        # `a and b` true, or `a or b` false: each side is known.
        if isinstance(test.operator, cst.And) == truth:
            return condition_literals(test.left, truth) + condition_literals(test.right, truth)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        operator = _COMPARISONS.get(type(comparison.operator))
        if operator is not None:
            atom = f"{_code(_bare(test.left))} {operator[0]} {_code(_bare(comparison.comparator))}"
            return ((atom, truth == operator[1]),)
    return ((_code(_bare(test)), truth),)


def _bare(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=(), rpar=()) if getattr(expr, "lpar", None) else expr


def _dotted(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = _dotted(expr.value)
        return f"{base}.{expr.attr.value}" if base is not None else None
    return None


def dotted_name(expr: cst.BaseExpression | None) -> str | None:
    """`model`, `self.model`: the name as the project model's events name it."""
    return _dotted(expr) if expr is not None else None


def is_simple_reference(expr: cst.BaseExpression | None) -> bool:
    """`model`, `self.model`, `accelerator.unwrap_model`-free dotted names: safe to repeat
    in an inserted statement."""
    return expr is not None and _dotted(expr) is not None


def _literal(expr: cst.BaseExpression | None) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def _is_true(expr: cst.BaseExpression) -> bool:
    return _literal(expr) is True


def _is_false(expr: cst.BaseExpression) -> bool:
    return _literal(expr) is False or (isinstance(expr, cst.Name) and expr.value == "None")


def _same(a: _Value, b: _Value) -> bool:
    if isinstance(a, _Part) and isinstance(b, _Part):
        return a.model is b.model
    return a is b


def _parts(value: _Value, _seen: frozenset[int] = frozenset()) -> Iterator[_Part]:
    """The models a value holds (a tuple's items, an object's attributes)."""
    if isinstance(value, _Part):
        yield value
    elif isinstance(value, _Tuple):
        for item in value.items:
            yield from _parts(item, _seen)
    elif isinstance(value, _Instance) and id(value) not in _seen:
        for item in list(value.attributes.values()):
            yield from _parts(item, _seen | {id(value)})


def _merge(values: list[_Value]) -> _Value:
    """What a function returns, over its `return` statements (bare ones excluded)."""
    found = [v for v in values if v is not None]
    if not found:
        return None
    first = found[0]
    if all(_same(first, v) for v in found):
        return first
    if isinstance(first, _Tuple) and all(isinstance(v, _Tuple) and len(v.items) == len(first.items) for v in found):
        return _Tuple(tuple(_merge([v.items[i] for v in found]) for i in range(len(first.items))))
    return None


def _keyword_value(call: cst.Call, args: list[_Value], name: str) -> _Value:
    for arg, value in zip(call.args, args):
        if arg.keyword is not None and arg.keyword.value == name:
            return value
    return None


def _dict_keys(expr: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
    if isinstance(expr, cst.Dict):
        keys = {}
        for element in expr.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                return None
            keys[str(element.key.evaluated_value)] = element.value
        return keys
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
        if any(arg.star or arg.keyword is None for arg in expr.args):
            return None
        return {arg.keyword.value: arg.value for arg in expr.args}
    return None


def _subscript_key(target: cst.Subscript) -> str | None:
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return None
    key = target.slice[0].slice.value
    return str(key.evaluated_value) if isinstance(key, cst.SimpleString) else None


def _dict_expression(expr: cst.BaseExpression | None, frame: _Frame) -> cst.BaseExpression | None:
    """A kwargs expression, with a name bound to an unchanged dict literal replaced by it."""
    if isinstance(expr, cst.Name) and expr.value != "None":
        value = frame.lookup(expr.value)
        if isinstance(value, _Dict) and value.expression is not None:
            return value.expression
    return expr


def _gc_enable_kwargs(call: cst.Call, frame: _Frame) -> HfCheckpointingKwargs:
    if any(arg.star for arg in call.args):
        return HfCheckpointingKwargs(KwargsShape.UNKNOWN)
    positional = [arg for arg in call.args if arg.keyword is None]
    value = positional[0].value if positional else keyword_value(call, GC_KWARGS)
    return HfCheckpointingKwargs.of(_dict_expression(value, frame))


def _training_arguments(call: cst.Call, frame: _Frame) -> _TrainingArguments:
    if any(arg.star for arg in call.args):
        return _TrainingArguments(call, None, HfCheckpointingKwargs(KwargsShape.UNKNOWN))
    enabled = keyword_value(call, "gradient_checkpointing")
    kwargs = HfCheckpointingKwargs.of(_dict_expression(keyword_value(call, GC_KWARGS), frame), trainer_path=True)
    return _TrainingArguments(call, False if enabled is None else _literal(enabled), kwargs)


def _config(call: cst.Call, frame: _Frame) -> _Config:
    use_cache = keyword_value(call, "use_cache")
    if any(arg.star == "**" for arg in call.args):
        return _Config(None)
    return _Config(use_cache is not None and not _is_true(use_cache))


def _quantized(call: cst.Call, frame: _Frame) -> bool | None:
    for name in ("load_in_4bit", "load_in_8bit"):
        value = keyword_value(call, name)
        if value is not None and not _is_false(value):
            return True
    config = keyword_value(call, "quantization_config")
    if config is not None and not _is_false(config):
        return True
    for arg in call.args:
        if arg.star == "**":
            value = frame.lookup(arg.value.value) if isinstance(arg.value, cst.Name) else None
            keys = value.keys if isinstance(value, _Dict) else None
            if keys is None:
                return None
            if any(k in keys and not _is_false(keys[k]) for k in ("load_in_4bit", "load_in_8bit", "quantization_config")):
                return True
    return False


def _may_load_a_model(names: Iterable[str]) -> bool:
    """`<class>.from_pretrained` where the class is chosen at runtime (a variable): not a
    library class, and not a tokenizer, config or processor by its name."""
    for name in names:
        owner = name.removesuffix(".from_pretrained")
        if owner.split(".", 1)[0] in _LIBRARY_ROOTS or NOT_MODEL_NAME.search(owner.rsplit(".", 1)[-1]):
            return False
    return True


def _is_peft_model_loader(name: str) -> bool:
    return name.startswith("peft.") and bool(re.search(r"\.PeftModel\w*\.from_pretrained$", name))


def _is_auto_peft_loader(name: str) -> bool:
    return name.startswith("peft.") and bool(re.search(r"\.AutoPeftModel\w*\.from_pretrained$", name))


def _is_config_class(name: str) -> bool:
    for suffix in (".from_pretrained", ".from_dict"):
        name = name.removesuffix(suffix)
    return name.split(".", 1)[0] == "transformers" and name.endswith("Config") and not name.endswith("GenerationConfig")


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


# --- entry point -----------------------------------------------------------------------------

_CACHE: dict[int, tuple[cst.Module, ScriptModels]] = {}
_CACHE_LOCK = threading.Lock()


def script_models(context: FileContext) -> ScriptModels:
    """The model objects of the file and their steps (computed once per parsed file, shared
    by the rules that ask)."""
    key = id(context.module)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None and cached[0] is context.module:
            return cached[1]
    result = _Interpreter(context).run()
    with _CACHE_LOCK:
        _CACHE.clear()  # one file at a time: the rules of a file run one after the other
        _CACHE[key] = (context.module, result)
    return result


def line_of(context: FileContext, node: cst.CSTNode) -> int:
    return context.position(node).start.line


def source_of(expr: cst.CSTNode) -> str:
    return _code(expr)


def insert_line(statement: cst.SimpleStatementLine | None, code: str, *, before: bool) -> Replacement | None:
    """A replacement inserting the statement `code` on its own line just before or after
    `statement`, at its indentation; comments and blank lines above `statement` stay above
    both. None when no line can go there (no statement, or one sharing a line with `if x:`)."""
    if statement is None:
        return None
    inserted = cst.parse_statement(code + "\n")
    if before:
        new = [inserted.with_changes(leading_lines=statement.leading_lines), statement.with_changes(leading_lines=())]
    else:
        new = [statement, inserted]
    return Replacement(statement, cst.FlattenSentinel(new))
