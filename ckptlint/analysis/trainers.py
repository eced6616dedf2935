"""The training arguments of a Hugging Face run and the trainers they are handed to: whether
the trainer (a project class configuring checkpointing, or TRL's defaults) decides how
checkpointing runs instead of transformers' default."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.fsdp import absolute_names
from ckptlint.model.library.trl import TRL_CONFIGS, TRL_NON_REENTRANT_CONFIGS, TRL_NON_REENTRANT_DEFAULT, TRL_NON_REENTRANT_TRAINERS, TRL_TRAINERS, is_trl_name
from ckptlint.versions import Applies

if TYPE_CHECKING:
    from ckptlint.rule import FileContext


def is_training_arguments(context: FileContext, call: cst.Call) -> bool:
    names = absolute_names(context, call.func)
    return bool(names) and all(context.project.is_training_arguments(name) for name in names)


def trainers_given(context: FileContext, calls: list[cst.Call], name: cst.Name | None) -> list[set[str]]:
    """The absolute names of each trainer the arguments, bound to `name`, are handed to."""
    if name is None:
        return []
    return [
        absolute_names(context, call.func) for call in calls
        if callee_name(call).endswith("Trainer")
        and any(isinstance(arg.value, cst.Name) and arg.value.value == name.value for arg in call.args)
    ]


def handed_to_configuring_trainer(context: FileContext, trainers: list[set[str]]) -> bool:
    """Whether arguments are handed to a trainer (`trainers`: `trainers_given`) whose class
    (or a base of the project) sets how checkpointing runs (`args.gradient_checkpointing_kwargs
    .setdefault("use_reentrant", False)` in its `__init__`): the trainer decides."""
    project = context.project
    return any(
        (facts := project.class_named(c)) is not None and facts.configures_checkpointing
        for names in trainers for absolute in names for c in project.ancestors(absolute)
    )


def trl_defaults_non_reentrant(context: FileContext, arguments: cst.Call, trainers: list[set[str]]) -> bool:
    """Whether the targeted TRL sets `use_reentrant` to False for these arguments
    (`library.TRL_NON_REENTRANT_*`): a TRL config on 0.27, handed to a TRL trainer from
    0.28 on, both from 0.27 on. Only where the project's TRL version is known."""
    config = any(is_trl_name(n, TRL_CONFIGS) for n in absolute_names(context, arguments.func))
    trainer = any(is_trl_name(n, TRL_TRAINERS) for names in trainers for n in names)
    if not (config or trainer):
        return False
    versions = TRL_NON_REENTRANT_DEFAULT if config and trainer else (
        TRL_NON_REENTRANT_CONFIGS if config else TRL_NON_REENTRANT_TRAINERS
    )
    return context.versions.applies((versions,)) is Applies.YES


def callee_name(call: cst.Call) -> str:
    func = call.func
    return func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else "..."
