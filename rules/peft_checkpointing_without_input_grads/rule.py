from __future__ import annotations

import ast
import re

from ckptlint.lazy_libcst import cst

from ckptlint.model.script_models.steps import ModelHistory, ModelStep, StepKind
from ckptlint.analysis.script_models import dotted_name, insert_line, is_simple_reference, line_of, script_models, source_of
from ckptlint.model.library.transformers import REENTRANT_DEFAULT_VERSIONS
from ckptlint.model.library.transformers import HfCheckpointingKwargs, KwargsShape
from ckptlint.model.evaluation.fates import Site
from ckptlint.rule import Rule
from ckptlint.types import Applicability, Severity
from ckptlint.versions import Applies

from .exposures import Exposure, exposures, has_adapters, reported_node, unfrozen_layers

PEFT_WORDS = ("get_peft_model", "PeftModel", "add_adapter", "load_adapter")
TRAINING_WORDS = ("backward", "training_step", "Trainer")
# `TrainingArguments(gradient_checkpointing=True)`, or the same in a dict of arguments.
TRAINER_ENABLING = re.compile(r"""gradient_checkpointing["']?\s*[=:]\s*True""")


class PeftCheckpointingWithoutInputGrads(Rule):
    """Reentrant gradient checkpointing on a PEFT model whose checkpointed inputs do not require grad.

    ## What it does
    Follows each Hugging Face model through the script and finds where gradient
    checkpointing is turned on (`gradient_checkpointing_enable(...)`, or
    `TrainingArguments(gradient_checkpointing=True)` for a model handed to transformers'
    `Trainer`) when all of these hold:

    - the model has adapters: checkpointing enabled after `get_peft_model` (on the
      `PeftModel` or on its base model), on a model loaded with trainable adapters
      (`AutoPeftModelFor*.from_pretrained` or `PeftModel.from_pretrained` with
      `is_trainable=True`), or enabled *before* `model.add_adapter(...)` (diffusers'
      DreamBooth-LoRA scripts do this to the frozen text encoder); or, without PEFT, the
      model (or the part holding the layers, a vision tower) is frozen and part of its layer
      stack made trainable again (`model.requires_grad_(False)` or `p.requires_grad = False`
      over `parameters()`, then `model.model.layers[-2:]` / `encoder.layers[-1]` unfrozen),
      its embeddings left frozen; a head or projector unfrozen outside the layers is not
      this case;
    - the effective checkpointing is reentrant: no `gradient_checkpointing_kwargs` with
      transformers < 5.0 (its default is `{"use_reentrant": True}`), `use_reentrant: True`,
      or a kwargs dict without `use_reentrant` in any version (transformers applies its own
      default only when the kwargs are `None`, so torch's reentrant default runs);
    - nothing makes the inputs of the checkpointed layers require grad:
      `enable_input_require_grads()`, `prepare_model_for_kbit_training` /
      `prepare_model_for_int8_training` (unless the model is known to be loaded in full
      precision: no quantization argument, and a literal Hub id that names no pre-quantized
      checkpoint such as a GPTQ or AWQ export), checkpointing enabled before `get_peft_model` on a
      model that is not quantized (PEFT then calls `enable_input_require_grads` itself),
      `add_adapter` before the checkpointing call (transformers then does), an embedding's
      `requires_grad_(True)` / `weight.requires_grad = True`, a forward hook on the
      embeddings that sets `requires_grad` (on `get_input_embeddings()` or by attribute
      path, `model.vision_model.embeddings`), or a PEFT config that makes the input
      embeddings trainable (`modules_to_save=["embed_tokens", "lm_head"]`,
      `trainable_token_indices`, as literals); and transformers does not do it itself (it does
      from 5.0, but only for models whose `main_input_name` is `input_ids`: ViT, CLIP or
      SigLIP vision towers, Whisper, Wav2Vec2 stay exposed; `AutoModelForSpeechSeq2Seq`
      maps to both kinds, and counts as taking other inputs when the literal checkpoint id it
      loads names Whisper, Speech2Text or SeamlessM4T).

    The model must be trained in the same script: a manual loop (`loss.backward()`) or
    transformers' `Trainer`. Helpers of other modules of the project are read through the
    project model: a model handed to one (`model = build_lora(model)`,
    `count_parameters(model)`) goes on in the script, with what the helper does to it
    counted at the call (`get_peft_model`, `enable_input_require_grads`,
    `prepare_model_for_kbit_training`) and, where the helper returns the model it was
    given (wrapped or not), the returned value the same model; so does a model a helper
    loads and wraps (`model = load_lora(name)`). `gradient_checkpointing_kwargs` given as a
    dict constant of another module (`from config import GC_KWARGS`) is read too, when it
    names `use_reentrant`.

    ## Why is this bad?
    The reentrant implementation only records a gradient path through a checkpointed
    region when one of its *inputs* requires grad. With a frozen base model, the hidden
    states entering the first layer come from frozen embeddings, so no layer output requires
    grad: the LoRA weights inside the layers get no gradient. torch only warns "None of the
    inputs have requires_grad=True. Gradients will be None" (from a line inside torch). If
    something after the layers is trainable (a classifier head, `modules_to_save=["lm_head"]`,
    the UNet beside a text encoder) the loss still backpropagates and training runs, silently
    without updating the adapters; otherwise backward fails with `RuntimeError: element 0
    of tensors does not require grad and does not have a grad_fn`.

    ## Example
    ```python
    model = get_peft_model(model, lora_config)
    model.gradient_checkpointing_enable()
    ```

    ## Use instead
    ```python
    model = get_peft_model(model, lora_config)
    model.enable_input_require_grads()
    model.gradient_checkpointing_enable()
    ```
    or `model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant":
    False})`.

    ## Fix safety
    The fix inserts `<model>.enable_input_require_grads()` on the line before the call, with
    its indentation (for `TrainingArguments`, before the statement that hands the model to
    the `Trainer`). It is **safe**: the hook it registers only marks the embedding output as
    requiring grad; the embedding weights stay frozen, and the gradients of everything
    already trained are unchanged. No fix when the call shares its line with a compound
    statement (`if gc: model...()`), or when the model is not named by a plain name or
    attribute.

    Not reported: a project `Trainer` subclass whose code sets the checkpointing kwargs or
    input grads itself, kwargs only known at runtime (a variable, `**kwargs`, `TrainingArguments`
    parsed from the command line), models handed to TRL's trainers (depending on the TRL
    version they enable input grads for PEFT models themselves) or to other trainers, models
    passed before training to a function the project model cannot see into (a library's, a
    module that is not part of the project: it may prepare them) or to a project function
    that trains, checkpoints or keeps them (the model's story goes on there), an imported
    kwargs constant without `use_reentrant` (entries such as `**other` may not be visible),
    architectures not known when transformers >= 5.0 is targeted. When
    the transformers version is unknown, the hazard of transformers < 5.0 is reported and
    the message says so.

    ## Evidence
    Measured on CPU with torch 2.13 (tiny models built from configs, LoRA `r=4`, one
    backward; "grads" = LoRA tensors whose `.grad` is set after backward):

    | case | transformers 4.46.3 + peft 0.13.2 | transformers 5.17.0 + peft 0.21.2 |
    |---|---|---|
    | Llama, `get_peft_model` then `gradient_checkpointing_enable()` (on the PeftModel or the base) | `RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn`, after the warning | grads 8/8 |
    | same with `modules_to_save=["lm_head"]`, or kwargs `{"use_reentrant": True}` / `{"preserve_rng_state": False}` | grads 0/8, only the warning | grads 8/8 |
    | Llama, then `{"use_reentrant": False}`, or `enable_input_require_grads()`, or `embed_tokens.requires_grad_(True)`, or a forward hook calling `requires_grad_` | grads 8/8 | grads 8/8 |
    | Llama, `gradient_checkpointing_enable()` before `get_peft_model` | grads 8/8 | grads 8/8 |
    | `Trainer` (1 step), `TrainingArguments(gradient_checkpointing=True)`, PEFT model | the same RuntimeError; with `modules_to_save`: grads 0/8 | grads 8/8 |
    | same with `gradient_checkpointing_kwargs={"use_reentrant": False}` | grads 8/8 | grads 8/8 |
    | CLIP text encoder (frozen, UNet stand-in trained), `gradient_checkpointing_enable()` then `add_adapter` | grads 0/16, only the warning | grads 16/16 |
    | same, `add_adapter` first | grads 16/16 | grads 16/16 |
    | same, `enable_input_require_grads()` inserted before the checkpointing call (the fix) | grads 16/16 | grads 16/16 |
    | ViT classifier (`modules_to_save=["classifier"]`), `get_peft_model` then `gradient_checkpointing_enable()` | grads 0/8 | grads 8/8 |
    | ViT, then `{"use_reentrant": True}` or `{"preserve_rng_state": False}` | grads 0/8 | grads 0/8, only the warning |
    | ViT, `enable_input_require_grads()` then `{"use_reentrant": True}` | grads 8/8 | grads 8/8 |
    | ViT, `gradient_checkpointing_enable({"use_reentrant": True})` then `add_adapter` (nothing else trainable) | the RuntimeError | the RuntimeError |

    Whisper (transformers 5.17.0, peft 0.21.2, `main_input_name` `input_features`), LoRA
    then `{"use_reentrant": True}`: grads 0/24 and the RuntimeError; `{"use_reentrant":
    False}`: grads 24/24. transformers 5.17's `AutoModelForSpeechSeq2Seq` mapping holds
    Whisper, Speech2Text, SeamlessM4T (`input_features`), Moonshine, SpeechT5
    (`input_values`) and Voxtral, Granite Speech, Qwen3 ASR (`input_ids`).

    Trainable input embeddings (torch 2.13, transformers 5.17.0, peft 0.21.2; Llama,
    `{"use_reentrant": True}`, then `disable_input_require_grads()` to take away the hook
    transformers 5 adds for `input_ids` models, which is what transformers < 5 runs):
    `modules_to_save=["lm_head"]`: grads 0/8, the warning; no `modules_to_save`: the
    RuntimeError; `modules_to_save=["embed_tokens", "lm_head"]`, `["embed_tokens"]`,
    `trainable_token_indices=[0, 1]` or `{"embed_tokens": [0, 1]}`: grads 8/8, no warning.
    peft 0.17.1 and 0.21.2 `_set_trainable` (`utils/other.py`) wrap every module whose name
    ends with a `modules_to_save` entry in a trainable copy.

    Frozen base, no PEFT (same set-up; "grads" = trainable tensors with `.grad` after backward):

    | case | transformers 4.46.3 | transformers 5.17.0 |
    |---|---|---|
    | Llama, `requires_grad_(False)`, last layer `requires_grad_(True)`, `gradient_checkpointing_enable()` | the RuntimeError, after the warning | grads 9/9 |
    | same with `lm_head` trainable, or the loop `p.requires_grad = False` / `True` and `{"use_reentrant": True}` | grads 1/10 (only `lm_head`), the warning | grads 10/10 |
    | same, `{"use_reentrant": False}` or `enable_input_require_grads()` | grads 10/10 | grads 10/10 |
    | ViT classifier, backbone frozen, last encoder layer unfrozen, default kwargs | grads 2/18 (the classifier only), the warning | grads 18/18 |
    | same, `{"use_reentrant": True}` | grads 2/18, the warning | grads 2/18, the warning |

    Source: transformers 4.46.3 and 4.57.6 `gradient_checkpointing_enable` default to
    `{"use_reentrant": True}` and call `enable_input_require_grads()` only when
    `_hf_peft_config_loaded` (set by `add_adapter` / `load_adapter`); 5.0.0 and 5.17.0
    default to `{"use_reentrant": False}` and call it when `main_input_name == "input_ids"`
    or `_hf_peft_config_loaded`. peft 0.13.2 and 0.21.2 `PeftModel.__init__` call it when
    `is_gradient_checkpointing` is already true and the model is not quantized;
    `prepare_model_for_kbit_training` calls it (and enables checkpointing) only for quantized
    models (peft 0.4.0, 0.13.2 and 0.17.1 `utils/other.py`: `loaded_in_kbit` or a GPTQ, AQLM,
    EETQ, HQQ, torchao `quantization_method`). The transformers 4.46.3 `Trainer` calls `gradient_checkpointing_enable` with
    `args.gradient_checkpointing_kwargs` in `train()` and nothing else. TRL 0.12.2's
    `SFTTrainer` enables input grads when it wraps the model itself (`peft_config=`); TRL
    1.16 also for a `PeftModel` passed in. Where `get_peft_model` is written does not
    matter, only when it runs: peft 0.13.2 `PeftModel.__init__` (peft_model.py:179) calls
    `_prepare_model_for_gradient_checkpointing` (enabling input grads) only if the model's
    `is_gradient_checkpointing` is already true, and transformers 4.46.0
    `gradient_checkpointing_enable` (modeling_utils.py:2596-2619) fills in `{"use_reentrant":
    True}` for `None` and calls `enable_input_require_grads()` only when
    `_hf_peft_config_loaded`, which `get_peft_model` does not set; 5.17.0 (modeling_utils.py:
    3131-3166) fills in `{"use_reentrant": False}` and enables input grads when
    `main_input_name == "input_ids"`. A helper in another module that wraps and returns
    the model is the same code run from another file. A test in `tests/test_hf_rules.py`
    re-checks the reentrant case on the installed transformers.
    """

    code = "CKPT021"
    severity = Severity.ERROR
    name = "peft-checkpointing-without-input-grads"
    message = (
        "{what} {when}: {reentrant}, and nothing makes the checkpointed layers' inputs require grad{why_5}, so "
        "{trained} get no gradient (torch only warns \"None of the inputs have requires_grad=True. Gradients "
        "will be None\"); call `{model}.enable_input_require_grads()` first, or pass "
        "`gradient_checkpointing_kwargs={{\"use_reentrant\": False}}`"
    )
    fix = Applicability.SAFE
    triggers = (b"gradient_checkpointing",)
    uses_project = True  # the project's Trainer and TrainingArguments subclasses, its modules

    @classmethod
    def may_apply_to(cls, text: str) -> bool:
        # A call that turns checkpointing on (the model may be trained in another module),
        # or a PEFT model and a trainer in one file (`TrainingArguments(gradient_checkpointing=
        # True)`); transformers' own modeling files, which only name the attribute, are skipped.
        # A `Trainer` handed arguments that turn checkpointing on counts too: the model may
        # come from a helper of another module that wrapped it in adapters.
        return super().may_apply_to(text) and (
            "gradient_checkpointing_enable" in text
            or (any(word in text for word in PEFT_WORDS) and any(word in text for word in TRAINING_WORDS))
            or ("Trainer" in text and TRAINER_ENABLING.search(text) is not None)
        )

    def finish(self) -> None:
        before_5 = self.context.versions.applies((REENTRANT_DEFAULT_VERSIONS,))
        reported = set()
        for history in script_models(self.context).histories:
            for exposure in exposures(history, self._trained_elsewhere):
                node = reported_node(exposure.step)
                if not exposure.applies(before_5) or node in reported:
                    continue
                reported.add(node)
                self._report(history, exposure, before_5)

    def _trained_elsewhere(self, step: ModelStep) -> Site | None:
        """Where the project trains the model by hand after it leaves this file's flow,
        with no input grads enabled on its way (`ckptlint.model.fates`)."""
        name = dotted_name(step.subject)
        if step.kind is not StepKind.GC_ENABLED or name is None:
            return None
        fate = self.context.project.model_fate(step.function, name, line_of(step.node))
        if fate.trained_by_hand and not fate.input_grads and not fate.unknown:
            return fate.trained[0]
        return None

    def _report(self, history: ModelHistory, exposure: Exposure, before_5: Applies) -> None:
        step = exposure.step
        subject = step.subject if is_simple_reference(step.subject) else None
        model = source_of(self.context, subject) if subject is not None else "model"
        if step.kind is StepKind.TRAINER:
            what = (
                f"`{self._callee(step.arguments)}(gradient_checkpointing=True)` for `{model}`, handed to "
                f"`{self._callee(step.node)}` at line {line_of(step.node)},"
            )
        else:
            what = f"gradient checkpointing enabled on `{model}`"
        if exposure.trained_at is not None:
            what += f" (trained by {exposure.trained_at})"
        why_5 = ""
        if exposure.from_5 and history.model_class is not None and before_5 is not Applies.YES:
            why_5 = (
                f" (transformers >= 5.0 does that itself only for `input_ids` models, and `{history.model_class.short_name}` "
                "takes other inputs)"
            )
        note = ""
        if before_5 is Applies.UNKNOWN and not exposure.from_5:
            note = f" (affects {REENTRANT_DEFAULT_VERSIONS}; target version unknown)"
        message = self.message.format(
            what=what,
            when=self._when(history, step),
            reentrant=_reentrant_reason(step.kwargs),
            why_5=why_5,
            model=model,
            trained="the adapters" if has_adapters(history, step) else "the layers made trainable",
        )
        fix = insert_line(self.context, step.statement, f"{model}.enable_input_require_grads()", before=True) if subject else None
        self.report(
            self.context.cst_node_at(reported_node(step), cst.Call),
            message + note,
            replacements=[fix] if fix is not None else [],
            fix_message=f"Insert `{model}.enable_input_require_grads()`",
        )

    def _callee(self, node: ast.AST | None) -> str:
        func = node.func if isinstance(node, ast.Call) else None
        return source_of(self.context, func) if func is not None else "TrainingArguments"

    def _when(self, history: ModelHistory, step: ModelStep) -> str:
        wraps = [w for w in history.of_kind(StepKind.PEFT_WRAPPED) if w.order <= step.order and not w.exclusive_with(step)]
        if wraps:
            wrap = wraps[-1]
            if isinstance(wrap.node, (ast.FunctionDef, ast.AsyncFunctionDef)):  # wrapped before the project hands it over
                return f"with adapters added before `{wrap.node.name}` gets it (every call passes a PEFT model)"
            return f"after `{self._callee(wrap.node)}` (line {line_of(wrap.node)})"
        adapters = [
            a for a in history.of_kind(StepKind.ADAPTER_ADDED) if a.order > step.order and not a.exclusive_with(step)
        ]
        if adapters:
            return f"before `{self._callee(adapters[0].node)}` (line {line_of(adapters[0].node)}) adds the adapters"
        unfrozen = [u for u in unfrozen_layers(history) if not u.exclusive_with(step)]
        if unfrozen:
            return (
                f"while its frozen layers are made trainable again (line {line_of(unfrozen[0].node)}; "
                "its embeddings stay frozen)"
            )
        return "on a model with adapters"


def _reentrant_reason(kwargs: HfCheckpointingKwargs | None) -> str:
    shape = kwargs.shape if kwargs is not None else KwargsShape.DEFAULT
    if shape is KwargsShape.WITH_FLAG:
        return "`use_reentrant=True` selects torch's reentrant implementation"
    if shape is KwargsShape.WITHOUT_FLAG:
        return (
            "its `gradient_checkpointing_kwargs` have no `use_reentrant`, so torch's reentrant default runs "
            "(transformers applies its own default only to `None`)"
        )
    return "transformers < 5.0 runs it reentrant by default"
