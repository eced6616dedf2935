"""Hugging Face gradient checkpointing in the libcst tree the rules read: a
`gradient_checkpointing_enable(...)` call and its kwargs, the LoRA dropout an adapter config
adds. What the kwargs make transformers run is `ckptlint.model.library.transformers`'."""

from __future__ import annotations

from collections.abc import Callable

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.branches import literal_truth
from ckptlint.model.form.branching import Conditions
from ckptlint.model.library.transformers import GC_ENABLE, GC_KWARGS, HfCheckpointingKwargs, KwargsShape
from ckptlint.model.library.peft import LORA_CONFIGS, OUTSIDE_CHECKPOINTED_LAYERS


def keyword_value(call: cst.Call, name: str) -> cst.BaseExpression | None:
    for arg in call.args:
        if arg.keyword is not None and arg.keyword.value == name:
            return arg.value
    return None


def has_star_kwargs(call: cst.Call) -> bool:
    return any(arg.star == "**" for arg in call.args)


def is_gc_enable_call(call: cst.Call) -> bool:
    """`<anything>.gradient_checkpointing_enable(...)`: transformers models (and PEFT models,
    which forward it) are built dynamically, so the method name is what can be seen."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == GC_ENABLE


def gc_enable_kwargs(call: cst.Call) -> HfCheckpointingKwargs:
    """The kwargs of a `gradient_checkpointing_enable(...)` call (first positional or keyword)."""
    if has_star_kwargs(call) or any(arg.star == "*" for arg in call.args):
        return HfCheckpointingKwargs(KwargsShape.UNKNOWN)
    positional = [arg for arg in call.args if arg.keyword is None]
    value = positional[0].value if positional else keyword_value(call, GC_KWARGS)
    return HfCheckpointingKwargs.of(value)


def checkpointed_lora_dropout(
    config: cst.BaseExpression | None, names: Callable[[cst.BaseExpression], set[str]], known: Conditions = ()
) -> str | None:
    """The `lora_dropout` of the LoRA adapters a call adds (`get_peft_model(model, config)`,
    `model.add_adapter(config)`) inside the layers gradient checkpointing wraps, as written,
    when it is known to be non-zero: `config` (the `LoraConfig(...)` call, or what the name
    passed is bound to) with a non-zero literal `lora_dropout`, or a parameter `known` says is
    non-zero (`lora_dropout=dropout` in a helper called with `dropout=0.05`). None for peft's
    default (0.0), a value not known, or adapters only on modules outside the layer stack
    (`lm_head`)."""
    if not isinstance(config, cst.Call) or not names(config.func) or not names(config.func) <= LORA_CONFIGS:
        return None
    if any(arg.star for arg in config.args) or any(arg.keyword is None for arg in config.args):
        return None
    keywords = {arg.keyword.value: arg.value for arg in config.args if arg.keyword is not None}
    targets = keywords.get("target_modules")
    written = _strings(targets) if targets is not None else None
    if written is not None and written and all(name.rsplit(".", 1)[-1] in OUTSIDE_CHECKPOINTED_LAYERS for name in written):
        return None
    dropout = keywords.get("lora_dropout")
    if dropout is None or not literal_truth(dropout, known):
        return None
    return cst.Module([]).code_for_node(dropout)


def _strings(node: cst.BaseExpression) -> list[str] | None:
    """The strings of a literal `"q_proj"` / `["q_proj", "v_proj"]`, else None."""
    if isinstance(node, cst.SimpleString):
        return [str(node.evaluated_value)]
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        found = [e.value.evaluated_value for e in node.elements if isinstance(e.value, cst.SimpleString)]
        return [str(v) for v in found] if len(found) == len(node.elements) else None
    return None
