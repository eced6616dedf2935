"""What the file's Hugging Face models go through (`model/script_models/`, asked through
`analysis/script_models.py`) that CKPT002 needs: a model kept for inference after its
checkpointing is turned on, and peft's QLoRA preparation, which turns it on.

The interpreter is imported when first asked: a file that never asks costs nothing."""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.model.library.transformers import HfCheckpointingKwargs

if TYPE_CHECKING:
    from ckptlint.rule import FileContext


def kept_for_inference(context: FileContext, call: cst.Call) -> bool:
    """Whether the Hugging Face model whose checkpointing `call` enables is then kept for
    inference (`ModelHistory.kept_for_inference`: put in eval mode, never trained here)."""
    from ckptlint.model.script_models.steps import StepKind
    from ckptlint.analysis.script_models import script_models

    return any(
        history.kept_for_inference(step)
        for history in script_models(context).histories
        for step in history.steps
        if step.kind is StepKind.GC_ENABLED and context.cst_node_at(step.node, cst.Call) is call
    )


def kbit_preparations(context: FileContext) -> list[tuple[cst.Call, HfCheckpointingKwargs]]:
    """The calls `prepare_model_for_kbit_training(model)` on a model loaded in 4 or 8 bit,
    each with the kwargs it checkpoints with: it turns Hugging Face checkpointing on (peft's
    `use_gradient_checkpointing=True`) with the `gradient_checkpointing_kwargs` it is given
    (peft 0.4 to 0.17: only on a quantized model; none given: transformers' default before
    5.0, reentrant). No fix: peft before 0.7 takes no `gradient_checkpointing_kwargs`."""
    from ckptlint.model.script_models.steps import StepKind
    from ckptlint.analysis.script_models import script_models

    found: list[tuple[cst.Call, HfCheckpointingKwargs]] = []
    checked: set[cst.Call] = set()  # a call may prepare the models of several loads (4 bit, 8 bit)
    for history in script_models(context).histories:
        if history.quantized is not True:
            continue
        for step in history.of_kind(StepKind.KBIT_PREPARED):
            call = context.cst_node_at(step.node, cst.Call) if isinstance(step.node, ast.Call) else None
            if step.enables_checkpointing and call is not None and call not in checked and not history.kept_for_inference(step):
                checked.add(call)
                found.append((call, step.kwargs or HfCheckpointingKwargs.of(None)))
    return found
