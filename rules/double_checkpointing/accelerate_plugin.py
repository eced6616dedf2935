"""Models that accelerate's FSDP plugin checkpoints: `FullyShardedDataParallelPlugin(
activation_checkpointing=True)` given to an `Accelerator` whose `prepare` gets the model.

accelerate (1.x `Accelerator.prepare_model`) then applies torch's
`apply_activation_checkpointing` with a `CheckpointImpl.NO_REENTRANT` wrapper to the layers
its FSDP wrap policy selects; a model whose Hugging Face gradient checkpointing is on in the
same function checkpoints those layers twice (CKPT005).
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.fsdp import absolute_names
from ckptlint.analysis.huggingface import keyword_value
from ckptlint.model.library.transformers import GC_ENABLE
from ckptlint.analysis.model_expressions import written_name
from ckptlint.model.library.accelerate import ACCELERATE_FSDP_PLUGIN
from ckptlint.rule import FileContext

ACCELERATORS = frozenset({"accelerate.Accelerator", "accelerate.accelerator.Accelerator"})


@dataclass(frozen=True)
class PluginCheckpointing:
    """Hugging Face checkpointing on a model the plugin also checkpoints."""

    enabling: cst.Call  # `model.gradient_checkpointing_enable(...)`
    plugin: cst.Call  # `FullyShardedDataParallelPlugin(activation_checkpointing=True, ...)`
    prepare: cst.Call  # `accelerator.prepare(model, ...)`


def plugin_checkpointed(
    context: FileContext, calls: list[cst.Call], scopes: dict[cst.Call, tuple], assigned: dict[tuple, list[cst.BaseExpression]]
) -> list[PluginCheckpointing]:
    """`gradient_checkpointing_enable` calls on a model that an accelerator built with a
    checkpointing FSDP plugin prepares in the same function (`scopes`: each call's scopes;
    `assigned`: the expressions the file binds to each plain name, by (scopes, name)). A
    name bound more than once in its function is not known."""

    def bound(scope: tuple, name: str) -> cst.BaseExpression | None:
        values = assigned.get((scope, name)) or ([] if not scope else assigned.get(((), name), []))
        return values[0] if len(values) == 1 else None

    def is_plugin(expr: cst.BaseExpression | None, scope: tuple) -> cst.Call | None:
        if isinstance(expr, cst.Name):
            value = bound(scope, expr.value)
            return is_plugin(value, scope) if isinstance(value, cst.Call) else None
        if not isinstance(expr, cst.Call):
            return None
        names = absolute_names(context, expr.func)
        enabled = keyword_value(expr, "activation_checkpointing")
        if names and names <= ACCELERATE_FSDP_PLUGIN and isinstance(enabled, cst.Name) and enabled.value == "True":
            return expr
        return None

    found = []
    for prepare in calls:
        func = prepare.func
        if not (isinstance(func, cst.Attribute) and func.attr.value == "prepare" and isinstance(func.value, cst.Name)):
            continue
        scope = scopes.get(prepare, ())
        accelerator = bound(scope, func.value.value)
        if not isinstance(accelerator, cst.Call) or not (absolute_names(context, accelerator.func) or {""}) <= ACCELERATORS:
            continue
        plugin = is_plugin(keyword_value(accelerator, "fsdp_plugin"), scope)
        if plugin is None:
            continue
        prepared = {written_name(arg.value) for arg in prepare.args if arg.keyword is None and not arg.star} - {None}
        for call in calls:
            enable = call.func
            if (
                isinstance(enable, cst.Attribute)
                and enable.attr.value == GC_ENABLE
                and written_name(enable.value) in prepared
                and scopes.get(call) == scopes.get(prepare)
            ):
                found.append(PluginCheckpointing(call, plugin, prepare))
    return found
