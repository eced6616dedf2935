"""When a model's steps in a file (`model/script_models/`) leave CKPT021's hazard: reentrant
gradient checkpointing turned on for a model with adapters (or a frozen base with layers
made trainable again) whose inputs never require grad, and in which transformers versions."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ckptlint.model.library.transformers import HfCheckpointingKwargs, KwargsShape
from ckptlint.model.library.transformers import MainInput
from ckptlint.model.script_models.steps import ModelHistory, ModelStep, StepKind, TrainerKind
from ckptlint.model.evaluation.fates import Site
from ckptlint.model.library.peft import PRE_QUANTIZED_CHECKPOINT
from ckptlint.versions import Applies


@dataclass(frozen=True)
class Exposure:
    """One checkpointing step whose adapters get no gradient, and in which versions."""

    step: ModelStep
    before_5: bool  # with transformers < 5.0
    from_5: bool  # with transformers >= 5.0
    trained_at: Site | None = None  # trained where the file's own flow does not reach

    def applies(self, before_5: Applies) -> bool:
        """Under the targeted transformers (`before_5`: whether it is < 5.0); an unknown
        version counts as either."""
        if before_5 is Applies.YES:
            return self.before_5
        if before_5 is Applies.NO:
            return self.from_5
        return self.before_5 or self.from_5


def exposures(history: ModelHistory, trained_elsewhere: Callable[[ModelStep], Site | None]) -> list[Exposure]:
    """The checkpointing steps of a model with adapters that leave the adapters without
    gradients, with the transformers versions in which they do; `trained_elsewhere` says
    where a model the file does not train itself is trained."""
    wraps = history.of_kind(StepKind.PEFT_WRAPPED)
    adapters = history.of_kind(StepKind.ADAPTER_ADDED)
    unfrozen = unfrozen_layers(history)
    if not wraps and not adapters and not unfrozen:
        return []
    trainers = history.of_kind(StepKind.TRAINER)
    # TRL's trainers prepare PEFT models in some versions; unknown trainers and arguments
    # parsed at runtime may turn checkpointing on with any kwargs.
    if any(t.trainer is not TrainerKind.TRANSFORMERS or t.enables_checkpointing is None for t in trainers):
        return []
    starts = [order for order in (history.training_starts, *(t.order for t in trainers)) if order is not None]
    if history.has(StepKind.INPUT_GRADS) or (history.has(StepKind.KBIT_PREPARED) and not _loaded_unquantized(history)):
        return []  # (`prepare_model_for_kbit_training` enables input grads on a quantized model only)
    # Trained in this file's flow, or (the model leaves it) where the project model says.
    elsewhere = not starts or history.escaped_before(min(starts))
    enabling = history.of_kind(StepKind.GC_ENABLED) + [t for t in trainers if t.enables_checkpointing]
    enabling.sort(key=lambda step: step.order)
    # PEFT enables input grads when checkpointing is already on (and the model is not quantized).
    if history.quantized is not True and any(
        g.order < w.order and not g.exclusive_with(w) for g in enabling for w in wraps
    ):
        return []
    # transformers does at each checkpointing call once `add_adapter` has run.
    if any(a.order < g.order and not a.exclusive_with(g) for g in enabling for a in adapters):
        return []
    main_input = history.model_class.main_input if history.model_class is not None else MainInput.UNKNOWN
    exposures = []
    for index, step in enumerate(enabling):
        if any(not later.exclusive_with(step) for later in enabling[index + 1 :]):
            continue  # a later call replaces the checkpoint function
        if (
            not any(w.order < step.order and not w.exclusive_with(step) for w in wraps)
            and not any(a.order > step.order and not a.exclusive_with(step) for a in adapters)
            and not any(not u.exclusive_with(step) for u in unfrozen)
        ):
            continue  # no adapters, and no frozen base with trainable layers, on any path through this call
        kwargs = step.kwargs or HfCheckpointingKwargs(KwargsShape.DEFAULT)
        before_5 = kwargs.reentrant_in(transformers_5=False) is True
        # From 5.0 transformers enables input grads itself for `input_ids` models, and the
        # rule stays silent when the architecture is not known.
        from_5 = kwargs.reentrant_in(transformers_5=True) is True and main_input is MainInput.OTHER
        trained_at = trained_elsewhere(step) if elsewhere else None
        if (before_5 or from_5) and (not elsewhere or trained_at is not None):
            exposures.append(Exposure(step, before_5, from_5, trained_at))
    return exposures


def _loaded_unquantized(history: ModelHistory) -> bool:
    """Whether the model is known to be loaded in full precision: no quantization argument,
    from a literal Hub id that names no pre-quantized checkpoint (`PRE_QUANTIZED_CHECKPOINT`)."""
    return (
        history.quantized is False
        and history.checkpoint is not None
        and not PRE_QUANTIZED_CHECKPOINT.search(history.checkpoint)
    )


def has_adapters(history: ModelHistory, step: ModelStep) -> bool:
    return any(w.order < step.order and not w.exclusive_with(step) for w in history.of_kind(StepKind.PEFT_WRAPPED)) or any(
        a.order > step.order and not a.exclusive_with(step) for a in history.of_kind(StepKind.ADAPTER_ADDED)
    )


def unfrozen_layers(history: ModelHistory) -> list[ModelStep]:
    """The steps that make part of a frozen layer stack trainable again: the model (or the
    part holding those layers, its embeddings with it) frozen first, then `model.layers[-2:]`
    unfrozen. A head or projector unfrozen outside the stack needs no gradient through the
    checkpointed layers, and is not one."""
    frozen = history.of_kind(StepKind.FROZEN)
    return [
        step
        for step in history.of_kind(StepKind.UNFROZEN)
        if any(f.order < step.order and step.path[: len(f.path)] == f.path and not f.exclusive_with(step) for f in frozen)
    ]


def reported_node(step: ModelStep):
    """The call that turns checkpointing on: `gradient_checkpointing_enable(...)`, or the
    `TrainingArguments(...)` the Trainer enables it from."""
    return step.arguments if step.kind is StepKind.TRAINER and step.arguments is not None else step.node
