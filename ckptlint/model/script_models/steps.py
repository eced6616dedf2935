"""What happens to a Hugging Face model in a script, step by step: the interpreter's answer
(`ckptlint.model.script_models.interpret`, asked through `ckptlint.analysis.script_models`),
read by CKPT020, CKPT021, CKPT033 and CKPT005."""

from __future__ import annotations

import ast
import enum
from dataclasses import dataclass

from ckptlint.model.form.branching import Branches, Conditions, exclusive
from ckptlint.model.library.transformers import HfCheckpointingKwargs
from ckptlint.model.library.transformers import ModelClass

class TrainerKind(str, enum.Enum):
    TRANSFORMERS = "transformers"  # transformers' Trainer (and the project's subclasses)
    TRL = "trl"  # TRL's trainers: whether they prepare PEFT models depends on the TRL version
    OTHER = "other"




class StepKind(str, enum.Enum):
    PEFT_WRAPPED = "get_peft_model"  # a PeftModel built around it (PeftModel.__init__ ran)
    ADAPTER_ADDED = "add_adapter"  # transformers' PEFT integration (`_hf_peft_config_loaded`)
    GC_ENABLED = "gradient_checkpointing_enable"
    KBIT_PREPARED = "prepare_model_for_kbit_training"
    INPUT_GRADS = "input grads enabled"  # enable_input_require_grads, embeddings requires_grad_ / hook
    USE_CACHE_OFF = "use_cache turned off"  # or possibly off: a value only known at runtime
    TRAINER = "handed to a trainer"
    ESCAPED = "handed to code not visible here"
    FROZEN = "parameters frozen"  # `requires_grad_(False)`, or `p.requires_grad = False` over `parameters()`
    UNFROZEN = "layers unfrozen"  # the same set True on a part of the layer stack (`model.layers[-2:]`)
    EVAL_MODE = "put in eval mode"  # `model.eval()`, `model.train(False)`
    TRAIN_MODE = "put in training mode"  # `model.train()`


@dataclass(frozen=True)
class ModelStep:
    kind: StepKind
    order: int  # interpretation order; helpers' steps are ordered where they are called
    # The call (or assignment, or the function a model is passed to) that did it: a node of
    # the file's `ast` tree (`FileContext.ast_module`); `FileContext.cst_node_at` gives the
    # libcst node a report or a fix needs.
    node: ast.AST
    branches: Branches = ()
    conditions: Conditions = ()
    # The small statement holding `node`, where a line may be inserted before or after it
    # (`cst_node_at(statement, cst.SimpleStatementLine)`: None on a header's line).
    statement: ast.stmt | None = None
    subject: ast.expr | None = None  # how the code names the model there
    path: tuple[str, ...] = ()  # FROZEN / UNFROZEN: the part of the model (`("model", "layers", "[]")`)
    kwargs: HfCheckpointingKwargs | None = None  # GC_ENABLED, KBIT_PREPARED, TRAINER
    enables_checkpointing: bool | None = None  # KBIT_PREPARED / TRAINER: known to turn it on
    trainer: TrainerKind | None = None  # TRAINER
    arguments: ast.Call | None = None  # TRAINER: the `TrainingArguments(...)` call, if known
    # The function it happens in, named as the project model names it (`pkg.train.main`,
    # `pkg.train.<module>`): where `ProjectIndex.model_fate` follows the model on from.
    function: str = ""
    # What is known of the parameters' truth where it happens (`Scope.known`: the literals a
    # call of the function it sits in passes, `lora_model(cfg, dropout=0.05)`).
    known: Conditions = ()

    @property
    def line(self) -> int:
        return self.node.lineno

    def exclusive_with(self, other: ModelStep) -> bool:
        """Whether the two steps can never both run: different branches of one `if`, or
        conditions that contradict each other (`if a and not b:` ... `if b:`)."""
        return exclusive(self.branches, self.conditions, other.branches, other.conditions)


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
    checkpoint: str | None = None  # the Hub id it is loaded from, when a literal

    @property
    def trained_here(self) -> bool:
        return self.training_starts is not None

    def escaped_before(self, order: int) -> bool:
        """Whether code not visible here got the model before `order` (and may have
        prepared it)."""
        return any(step.kind is StepKind.ESCAPED and step.order <= order for step in self.steps)

    def kept_for_inference(self, step: ModelStep) -> bool:
        """Whether the model is put in eval mode after `step` (where it can run) and never in
        training mode here, nor handed to a trainer: kept for inference (a DPO reference
        model loaded like the policy), where Hugging Face checkpoints nothing (every
        architecture checks `self.gradient_checkpointing and self.training`)."""
        return not self.has(StepKind.TRAIN_MODE, StepKind.TRAINER) and any(
            later.order > step.order and not later.exclusive_with(step) for later in self.of_kind(StepKind.EVAL_MODE)
        )

    def of_kind(self, *kinds: StepKind) -> list[ModelStep]:
        return [step for step in self.steps if step.kind in kinds]

    def has(self, *kinds: StepKind) -> bool:
        return any(step.kind in kinds for step in self.steps)


@dataclass(frozen=True)
class ScriptModels:
    histories: tuple[ModelHistory, ...]

