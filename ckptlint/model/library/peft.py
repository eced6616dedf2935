"""peft's behaviour as data: what wraps a model, LoRA's configuration and dropout, what
`prepare_model_for_kbit_training` does, which modules a PEFT config makes trainable."""

from __future__ import annotations

import re

from ckptlint.model.library.transformers import EMBEDDING_PARTS

# `prepare_model_for_kbit_training(model)` freezes the model and, only for a quantized one
# (`is_loaded_in_8bit` / `is_loaded_in_4bit`, or a GPTQ, AQLM, EETQ, HQQ, torchao
# `quantization_method`), enables input grads and gradient checkpointing; on a bf16/fp32 model
# it does neither. Read in peft 0.4.0, 0.13.2 and 0.17.1 (`peft/utils/other.py`).
# `from_pretrained` loads a checkpoint quantized without any quantization argument when its
# config carries a `quantization_config` (GPTQ, AWQ, bitsandbytes exports): a Hub id naming
# one of these is not known to load unquantized.
PRE_QUANTIZED_CHECKPOINT = re.compile(r"gptq|awq|bnb|nf4|[248]-?bit|int[248]|hqq|eetq|aqlm|quant|exl2|gguf|fp8", re.I)


GET_PEFT_MODEL = frozenset({"peft.get_peft_model", "peft.mapping.get_peft_model", "peft.mapping_func.get_peft_model"})
# peft `tuners/lora/config.py`: `LoraConfig(lora_dropout=0.0, target_modules=None, ...)`; each
# LoRA layer's `update_layer` makes `lora_dropout[adapter]` an `nn.Dropout(p=lora_dropout)` when
# `lora_dropout > 0.0` (else `nn.Identity()`) and applies it to the layer's input in training
# (`tuners/lora/layer.py`, peft 0.6 to 0.13): adapters on the projections inside a decoder
# layer draw a dropout mask each time the layer runs.
LORA_CONFIGS = frozenset({"peft.LoraConfig", "peft.tuners.LoraConfig", "peft.tuners.lora.LoraConfig",
                          "peft.tuners.lora.config.LoraConfig"})
# Modules LoRA may target that sit outside the layer stack gradient checkpointing wraps.
OUTSIDE_CHECKPOINTED_LAYERS = frozenset({"lm_head", "embed_tokens", "wte", "wpe", "word_embeddings", "embed_out",
                                         "score", "classifier", "shared"})
# peft (0.17.1, 0.21.2) `utils/other.py` `_set_trainable`: each module whose name ends with an
# entry of `modules_to_save` is wrapped in a trainable copy; `trainable_token_indices` (a list:
# the input embeddings; a dict: the named embedding modules) makes some of its rows trainable.
# Either on the input embeddings makes their output require grad, so a reentrant checkpoint's
# first layer records a gradient path (measured, torch 2.13: CKPT021's Evidence).
PEFT_TRAINABLE_MODULES = ("modules_to_save", "trainable_token_indices")


def is_peft_config(callee: str) -> bool:
    """A PEFT adapter configuration class (`peft.LoraConfig`, `peft.tuners.lora.LoraConfig`)."""
    return callee.startswith("peft.") and callee.endswith("Config") and callee.rsplit(".", 1)[-1] != "PeftConfig"


def trains_input_embeddings(keyword: str, names: tuple[str, ...] | None) -> bool:
    """Whether a PEFT config keyword of `PEFT_TRAINABLE_MODULES` makes the input embeddings
    trainable, from the module names it lists (`names`: None when the value is a bare list of
    token indices, which peft applies to the input embeddings). GPT-NeoX's `embed_out` is its
    output head."""
    if keyword == "trainable_token_indices" and names is None:
        return True
    return any(EMBEDDING_PARTS.search(short) and short != "embed_out" for short in (n.rsplit(".", 1)[-1] for n in names or ()))


# peft 0.13 `utils/other.py`: `prepare_model_for_kbit_training(model,
# use_gradient_checkpointing=True, gradient_checkpointing_kwargs=None)` enables gradient
# checkpointing and input grads.
PREPARE_FOR_KBIT = frozenset(
    {
        f"peft{module}.{function}"
        for module in ("", ".utils", ".utils.other")
        for function in ("prepare_model_for_kbit_training", "prepare_model_for_int8_training")
    }
)
