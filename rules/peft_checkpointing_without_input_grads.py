from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.script_models import (
    MainInput,
    ModelHistory,
    ModelStep,
    StepKind,
    TrainerKind,
    dotted_name,
    insert_line,
    is_simple_reference,
    line_of,
    script_models,
    source_of,
)
from ckptlint.model.evaluation.fates import Site
from ckptlint.model.library.transformers import HfCheckpointingKwargs, KwargsShape
from ckptlint.model.library.peft import PRE_QUANTIZED_CHECKPOINT
from ckptlint.model.library.transformers import REENTRANT_DEFAULT_VERSIONS
from ckptlint.rule import Invalid, Rule, Valid
from ckptlint.types import Applicability
from ckptlint.versions import Applies

PEFT_WORDS = ("get_peft_model", "PeftModel", "add_adapter", "load_adapter")
TRAINING_WORDS = ("backward", "training_step", "Trainer")
# `TrainingArguments(gradient_checkpointing=True)`, or the same in a dict of arguments.
TRAINER_ENABLING = re.compile(r"""gradient_checkpointing["']?\s*[=:]\s*True""")


@dataclass(frozen=True)
class _Exposure:
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
            for exposure in _exposures(history, self._trained_elsewhere):
                node = _reported_node(exposure.step)
                if not exposure.applies(before_5) or node in reported:
                    continue
                reported.add(node)
                self._report(history, exposure, before_5)

    def _trained_elsewhere(self, step: ModelStep) -> Site | None:
        """Where the project trains the model by hand after it leaves this file's flow,
        with no input grads enabled on its way (`ckptlint.model.evaluation.fates`)."""
        name = dotted_name(step.subject)
        if step.kind is not StepKind.GC_ENABLED or name is None:
            return None
        fate = self.context.project.model_fate(step.function, name, line_of(step.node))
        if fate.trained_by_hand and not fate.input_grads and not fate.unknown:
            return fate.trained[0]
        return None

    def _report(self, history: ModelHistory, exposure: _Exposure, before_5: Applies) -> None:
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
            trained="the adapters" if _has_adapters(history, step) else "the layers made trainable",
        )
        fix = insert_line(self.context, step.statement, f"{model}.enable_input_require_grads()", before=True) if subject else None
        self.report(
            self.context.cst_node_at(_reported_node(step), cst.Call),
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
        unfrozen = [u for u in _unfrozen_layers(history) if not u.exclusive_with(step)]
        if unfrozen:
            return (
                f"while its frozen layers are made trainable again (line {line_of(unfrozen[0].node)}; "
                "its embeddings stay frozen)"
            )
        return "on a model with adapters"

    valid = [
        # `prepare_model_for_kbit_training` on a quantized model (an argument, or a Hub
        # checkpoint that carries its own quantization) enables input grads itself.
        Valid(
            """
            from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
            from transformers import AutoModelForCausalLM, BitsAndBytesConfig

            def train(name, data):
                model = AutoModelForCausalLM.from_pretrained(name, quantization_config=BitsAndBytesConfig(load_in_4bit=True))
                model = prepare_model_for_kbit_training(model)
                model = get_peft_model(model, LoraConfig(r=8))
                model.gradient_checkpointing_enable()
                for batch in data:
                    model(**batch).loss.backward()

            def train_gptq(data):
                model = AutoModelForCausalLM.from_pretrained("TheBloke/Llama-2-7B-GPTQ")
                model = prepare_model_for_kbit_training(model)
                model = get_peft_model(model, LoraConfig(r=8))
                model.gradient_checkpointing_enable()
                for batch in data:
                    model(**batch).loss.backward()
            """
        ),
        # A project Trainer that sets its own checkpointing kwargs: not transformers' default.
        Valid(
            """
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

            class NonReentrantTrainer(Trainer):
                def __init__(self, *args, **kwargs):
                    super().__init__(*args, **kwargs)
                    self.args.gradient_checkpointing_kwargs = {"use_reentrant": False}

            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(r=8))
            args = TrainingArguments("out", gradient_checkpointing=True)
            NonReentrantTrainer(model=model, args=args, train_dataset=ds).train()
            """,
            target_versions={"transformers": "4.46"},
        ),
        # A frozen model whose head alone trains (a linear probe): the layers need no gradient.
        # Input grads enabled before checkpointing a partially unfrozen model.
        Valid(
            """
            from transformers import AutoModelForCausalLM

            probe = AutoModelForCausalLM.from_pretrained("m")
            probe.requires_grad_(False)
            probe.lm_head.requires_grad_(True)
            probe.gradient_checkpointing_enable()
            tuned = AutoModelForCausalLM.from_pretrained("m")
            tuned.requires_grad_(False)
            for layer in tuned.model.layers[-2:]:
                layer.requires_grad_(True)
            tuned.enable_input_require_grads()
            tuned.gradient_checkpointing_enable()
            for batch in loader:
                probe(**batch).loss.backward()
                tuned(**batch).loss.backward()
            """,
            target_versions={"transformers": "4.46"},
        ),
        # Input grads enabled, hundreds of lines away; non-reentrant kwargs.
        Valid(
            """
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForCausalLM

            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(r=8))
            model.enable_input_require_grads()
            # far away
            model.gradient_checkpointing_enable()
            other = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(r=8))
            other.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            for batch in loader:
                model(**batch).loss.backward()
                other(**batch).loss.backward()
            """.replace("# far away", ("\n" + " " * 12).join(["print('...')"] * 300)),
            target_versions={"transformers": "4.46"},
        ),
        # Checkpointing before get_peft_model: PEFT enables input grads; QLoRA preparation.
        Valid(
            """
            from peft import get_peft_model, prepare_model_for_kbit_training
            from transformers import AutoModelForCausalLM, BitsAndBytesConfig

            model = AutoModelForCausalLM.from_pretrained("m")
            model.gradient_checkpointing_enable()
            model = get_peft_model(model, lora_config)

            qmodel = AutoModelForCausalLM.from_pretrained("m", quantization_config=BitsAndBytesConfig(load_in_4bit=True))
            qmodel = prepare_model_for_kbit_training(qmodel)
            qmodel = get_peft_model(qmodel, lora_config)
            qmodel.gradient_checkpointing_enable()
            for batch in loader:
                model(**batch).loss.backward()
                qmodel(**batch).loss.backward()
            """,
            target_versions={"transformers": "4.46"},
        ),
        # The workaround in a helper of the same file: an embeddings forward hook.
        Valid(
            """
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM

            def make_inputs_require_grad(module, inputs, output):
                output.requires_grad_(True)

            def prepare(model):
                model.get_input_embeddings().register_forward_hook(make_inputs_require_grad)
                return model

            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
            model = prepare(model)
            model.gradient_checkpointing_enable()
            for batch in loader:
                model(**batch).loss.backward()
            """,
            target_versions={"transformers": "4.46"},
        ),
        # DreamBooth order that works: add_adapter before enabling checkpointing.
        Valid(
            """
            from transformers import CLIPTextModel

            text_encoder = CLIPTextModel.from_pretrained(path, subfolder="text_encoder")
            text_encoder.requires_grad_(False)
            text_encoder.add_adapter(text_lora_config)
            text_encoder.gradient_checkpointing_enable()
            for batch in loader:
                accelerator.backward(loss_fn(unet, text_encoder, batch))
            """,
            target_versions={"transformers": "4.46"},
        ),
        # TRL prepares the model itself; kwargs from a variable; args from the command line.
        Valid(
            """
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments
            from trl import SFTConfig, SFTTrainer

            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
            SFTTrainer(model=model, args=SFTConfig("out", gradient_checkpointing=True)).train()

            second = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
            args = TrainingArguments("out", gradient_checkpointing=True, gradient_checkpointing_kwargs=gc_kwargs)
            Trainer(model=second, args=args).train()

            (training_args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
            third = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
            Trainer(model=third, args=training_args).train()
            """,
            target_versions={"transformers": "4.46"},
        ),
        # transformers >= 5.0 enables input grads for text models itself, reentrant or not.
        Valid(
            """
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM

            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            for batch in loader:
                model(**batch).loss.backward()
            """,
            target_versions={"transformers": "5.17"},
        ),
        # Checkpointing only without LoRA (PEFT's DreamBooth examples): the conditions exclude
        # each other although they are separate `if` statements.
        Valid(
            """
            from peft import LoraConfig, get_peft_model
            from transformers import CLIPTextModel

            text_encoder = CLIPTextModel.from_pretrained(path, subfolder="text_encoder")
            if not args.train_text_encoder:
                text_encoder.requires_grad_(False)
            elif args.train_text_encoder and args.use_lora:
                text_encoder = get_peft_model(text_encoder, LoraConfig(r=8))
            if args.gradient_checkpointing:
                if args.train_text_encoder and not (args.use_lora or args.use_oft):
                    text_encoder.gradient_checkpointing_enable()
            for batch in loader:
                accelerator.backward(loss_fn(text_encoder, batch))
            """,
            target_versions={"transformers": "4.46"},
        ),
        # The workaround in a method of a helper class of the same file.
        Valid(
            """
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM

            class TrainingPrep:
                def __init__(self, use_cache=False):
                    self.use_cache = use_cache

                def __call__(self, model):
                    model.enable_input_require_grads()
                    model.config.use_cache = self.use_cache

            prepare = TrainingPrep()
            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
            model.gradient_checkpointing_enable()
            prepare(model)
            for batch in loader:
                model(**batch).loss.backward()
            """,
            target_versions={"transformers": "4.46"},
        ),
        # A helper imported from another module of the project gets the model first.
        Valid(
            """
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM
            from .training_utils import prepare_for_training

            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
            prepare_for_training(model)
            model.gradient_checkpointing_enable()
            for batch in loader:
                model(**batch).loss.backward()
            """,
            target_versions={"transformers": "4.46"},
        ),
        # transformers >= 5.0: the speech auto class with a Voxtral checkpoint (it takes
        # `input_ids`, and transformers enables input grads), or a checkpoint only known at runtime.
        Valid(
            """
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForSpeechSeq2Seq

            model = AutoModelForSpeechSeq2Seq.from_pretrained("mistralai/Voxtral-Mini-3B-2507")
            model = get_peft_model(model, LoraConfig(r=32, target_modules=["q_proj", "v_proj"]))
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            other = get_peft_model(AutoModelForSpeechSeq2Seq.from_pretrained(args.model), LoraConfig(r=8))
            other.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            for batch in loader:
                model(**batch).loss.backward()
                other(**batch).loss.backward()
            """,
            target_versions={"transformers": "5.17"},
        ),
        # New tokens: PEFT trains a copy of the input embeddings (`modules_to_save`,
        # `trainable_token_indices`), whose output requires grad.
        Valid(
            """
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

            model = AutoModelForCausalLM.from_pretrained("m")
            model.resize_token_embeddings(len(tok))
            cfg = LoraConfig(r=16, target_modules=["q_proj", "v_proj"], modules_to_save=["embed_tokens", "lm_head"])
            model = get_peft_model(model, cfg)
            Trainer(model=model, args=TrainingArguments("out", gradient_checkpointing=True)).train()
            tokens = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(r=8, trainable_token_indices=[0, 1]))
            tokens.gradient_checkpointing_enable()
            for batch in loader:
                tokens(**batch).loss.backward()
            """,
            target_versions={"transformers": "4.46"},
        ),
    ]
    invalid = [
        # `prepare_model_for_kbit_training` on a model loaded in bf16 only freezes it: input
        # grads are enabled for a quantized model alone (peft 0.4 to 0.17).
        Invalid(
            """
            import torch
            from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", torch_dtype=torch.bfloat16)
            model = prepare_model_for_kbit_training(model)
            model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
            model.gradient_checkpointing_enable()
            for batch in []:
                model(**batch).loss.backward()
            """,
            line=8,
            column=1,
            target_versions={"transformers": "4.40"},
            message_contains="after `get_peft_model` (line 7)",
            expected_fix="""
            import torch
            from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", torch_dtype=torch.bfloat16)
            model = prepare_model_for_kbit_training(model)
            model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
            model.enable_input_require_grads()
            model.gradient_checkpointing_enable()
            for batch in []:
                model(**batch).loss.backward()
            """,
        ),
        # Only the head is saved: the embeddings stay frozen (a GPT-NeoX head named `embed_out`
        # is no embedding either).
        Invalid(
            """
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

            model = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-160m")
            cfg = LoraConfig(r=16, target_modules=["query_key_value"], modules_to_save=["embed_out"])
            model = get_peft_model(model, cfg)
            args = TrainingArguments("out", gradient_checkpointing=True)
            Trainer(model=model, args=args).train()
            """,
            line=7,
            column=8,
            target_versions={"transformers": "4.46"},
            message_contains="after `get_peft_model` (line 6)",
            expected_fix="""
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

            model = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-160m")
            cfg = LoraConfig(r=16, target_modules=["query_key_value"], modules_to_save=["embed_out"])
            model = get_peft_model(model, cfg)
            args = TrainingArguments("out", gradient_checkpointing=True)
            model.enable_input_require_grads()
            Trainer(model=model, args=args).train()
            """,
        ),
        # No adapters: the base frozen, its last layers trainable again, reentrant by default.
        Invalid(
            """
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained("m")
            for param in model.parameters():
                param.requires_grad = False
            for param in model.model.layers[-2:].parameters():
                param.requires_grad = True
            model.gradient_checkpointing_enable()
            for batch in loader:
                model(**batch).loss.backward()
            """,
            line=8,
            column=1,
            message_contains="frozen layers are made trainable again (line 7",
            target_versions={"transformers": "4.46"},
            expected_fix="""
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained("m")
            for param in model.parameters():
                param.requires_grad = False
            for param in model.model.layers[-2:].parameters():
                param.requires_grad = True
            model.enable_input_require_grads()
            model.gradient_checkpointing_enable()
            for batch in loader:
                model(**batch).loss.backward()
            """,
        ),
        Invalid(
            """
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", use_cache=False)
            model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
            # trade compute for memory
            model.gradient_checkpointing_enable()
            for batch in loader:
                model(**batch).loss.backward()
            """,
            line=7,
            target_versions={"transformers": "4.46"},
            message_contains="after `get_peft_model` (line 5): transformers < 5.0 runs it reentrant by default",
            expected_fix="""
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForCausalLM

            model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", use_cache=False)
            model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
            # trade compute for memory
            model.enable_input_require_grads()
            model.gradient_checkpointing_enable()
            for batch in loader:
                model(**batch).loss.backward()
            """,
        ),
        # The Trainer path: reported at TrainingArguments, fixed before the Trainer.
        Invalid(
            """
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

            args = TrainingArguments(
                output_dir="out",
                gradient_checkpointing=True,
            )
            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
            trainer = Trainer(model=model, args=args, train_dataset=train)
            trainer.train()
            """,
            line=4,
            column=8,
            target_versions={"transformers": "4.46"},
            message_contains="`TrainingArguments(gradient_checkpointing=True)` for `model`, handed to `Trainer` at line 9",
            expected_fix="""
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

            args = TrainingArguments(
                output_dir="out",
                gradient_checkpointing=True,
            )
            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
            model.enable_input_require_grads()
            trainer = Trainer(model=model, args=args, train_dataset=train)
            trainer.train()
            """,
        ),
        # diffusers DreamBooth LoRA: the text encoder is checkpointed before add_adapter.
        Invalid(
            """
            text_encoder = text_encoder_cls.from_pretrained(args.pretrained_model_name_or_path, subfolder="text_encoder")
            text_encoder.requires_grad_(False)
            if args.gradient_checkpointing:
                unet.enable_gradient_checkpointing()
                if args.train_text_encoder:
                    text_encoder.gradient_checkpointing_enable()
            if args.train_text_encoder:
                text_encoder.add_adapter(text_lora_config)
            for batch in train_dataloader:
                accelerator.backward(compute_loss(unet, text_encoder, batch))
            """,
            line=6,
            column=9,
            target_versions={"transformers": "4.46"},
            message_contains="before `text_encoder.add_adapter` (line 8) adds the adapters",
            expected_fix="""
            text_encoder = text_encoder_cls.from_pretrained(args.pretrained_model_name_or_path, subfolder="text_encoder")
            text_encoder.requires_grad_(False)
            if args.gradient_checkpointing:
                unet.enable_gradient_checkpointing()
                if args.train_text_encoder:
                    text_encoder.enable_input_require_grads()
                    text_encoder.gradient_checkpointing_enable()
            if args.train_text_encoder:
                text_encoder.add_adapter(text_lora_config)
            for batch in train_dataloader:
                accelerator.backward(compute_loss(unet, text_encoder, batch))
            """,
        ),
        # A training-loop class of the same file: its methods run on the object built here.
        Invalid(
            """
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM

            class LoopRunner:
                def __init__(self, model, loader):
                    self.model = model
                    self.loader = loader

                def setup(self):
                    self.model.gradient_checkpointing_enable()

                def run(self):
                    for batch in self.loader:
                        self.model(**batch).loss.backward()

            runner = LoopRunner(get_peft_model(AutoModelForCausalLM.from_pretrained("m", use_cache=False), lora), loader)
            runner.setup()
            runner.run()
            """,
            line=10,
            column=9,
            target_versions={"transformers": "4.46"},
            expected_fix="""
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM

            class LoopRunner:
                def __init__(self, model, loader):
                    self.model = model
                    self.loader = loader

                def setup(self):
                    self.model.enable_input_require_grads()
                    self.model.gradient_checkpointing_enable()

                def run(self):
                    for batch in self.loader:
                        self.model(**batch).loss.backward()

            runner = LoopRunner(get_peft_model(AutoModelForCausalLM.from_pretrained("m", use_cache=False), lora), loader)
            runner.setup()
            runner.run()
            """,
        ),
        # transformers >= 5.0: a vision model with explicitly reentrant kwargs stays exposed.
        Invalid(
            """
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForImageClassification

            model = AutoModelForImageClassification.from_pretrained("google/vit-base-patch16-224-in21k")
            model = get_peft_model(model, LoraConfig(target_modules=["query", "value"], modules_to_save=["classifier"]))
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            for batch in loader:
                model(**batch).loss.backward()
            """,
            line=6,
            target_versions={"transformers": "5.17"},
            message_contains="`AutoModelForImageClassification` takes other inputs",
            expected_fix="""
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForImageClassification

            model = AutoModelForImageClassification.from_pretrained("google/vit-base-patch16-224-in21k")
            model = get_peft_model(model, LoraConfig(target_modules=["query", "value"], modules_to_save=["classifier"]))
            model.enable_input_require_grads()
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            for batch in loader:
                model(**batch).loss.backward()
            """,
        ),
        # A dict without `use_reentrant` runs reentrant; version unknown: the message says so.
        Invalid(
            """
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM

            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m", use_cache=False), lora_config)
            model.base_model.model.gradient_checkpointing_enable({"preserve_rng_state": False})
            for batch in loader:
                model(**batch).loss.backward()
            """,
            line=5,
            message_contains="(affects transformers<5.0; target version unknown)",
            expected_fix="""
            from peft import get_peft_model
            from transformers import AutoModelForCausalLM

            model = get_peft_model(AutoModelForCausalLM.from_pretrained("m", use_cache=False), lora_config)
            model.base_model.model.enable_input_require_grads()
            model.base_model.model.gradient_checkpointing_enable({"preserve_rng_state": False})
            for batch in loader:
                model(**batch).loss.backward()
            """,
        ),
        # transformers >= 5.0: a Whisper checkpoint loaded through the speech auto class.
        Invalid(
            """
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForSpeechSeq2Seq

            model = AutoModelForSpeechSeq2Seq.from_pretrained("openai/whisper-small")
            model = get_peft_model(model, LoraConfig(r=32, target_modules=["q_proj", "v_proj"]))
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            for batch in loader:
                model(**batch).loss.backward()
            """,
            line=6,
            target_versions={"transformers": "5.17"},
            message_contains="`AutoModelForSpeechSeq2Seq` takes other inputs",
            expected_fix="""
            from peft import LoraConfig, get_peft_model
            from transformers import AutoModelForSpeechSeq2Seq

            model = AutoModelForSpeechSeq2Seq.from_pretrained("openai/whisper-small")
            model = get_peft_model(model, LoraConfig(r=32, target_modules=["q_proj", "v_proj"]))
            model.enable_input_require_grads()
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
            for batch in loader:
                model(**batch).loss.backward()
            """,
        ),
    ]


def _exposures(history: ModelHistory, trained_elsewhere: Callable[[ModelStep], Site | None]) -> list[_Exposure]:
    """The checkpointing steps of a model with adapters that leave the adapters without
    gradients, with the transformers versions in which they do; `trained_elsewhere` says
    where a model the file does not train itself is trained."""
    wraps = history.of_kind(StepKind.PEFT_WRAPPED)
    adapters = history.of_kind(StepKind.ADAPTER_ADDED)
    unfrozen = _unfrozen_layers(history)
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
            exposures.append(_Exposure(step, before_5, from_5, trained_at))
    return exposures


def _loaded_unquantized(history: ModelHistory) -> bool:
    """Whether the model is known to be loaded in full precision: no quantization argument,
    from a literal Hub id that names no pre-quantized checkpoint (`PRE_QUANTIZED_CHECKPOINT`)."""
    return (
        history.quantized is False
        and history.checkpoint is not None
        and not PRE_QUANTIZED_CHECKPOINT.search(history.checkpoint)
    )


def _has_adapters(history: ModelHistory, step: ModelStep) -> bool:
    return any(w.order < step.order and not w.exclusive_with(step) for w in history.of_kind(StepKind.PEFT_WRAPPED)) or any(
        a.order > step.order and not a.exclusive_with(step) for a in history.of_kind(StepKind.ADAPTER_ADDED)
    )


def _unfrozen_layers(history: ModelHistory) -> list[ModelStep]:
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


def _reported_node(step: ModelStep):
    """The call that turns checkpointing on: `gradient_checkpointing_enable(...)`, or the
    `TrainingArguments(...)` the Trainer enables it from."""
    return step.arguments if step.kind is StepKind.TRAINER and step.arguments is not None else step.node
