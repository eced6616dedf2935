"""Calls of transformers' `_gradient_checkpointing_func` in a model's own code, and whether
the project runs them reentrant.

`gradient_checkpointing_enable(gradient_checkpointing_kwargs=None)` stores
`functools.partial(checkpoint, **gradient_checkpointing_kwargs)` as
`module._gradient_checkpointing_func` on every module with a `gradient_checkpointing` flag
(transformers >= 4.35 `modeling_utils.py`; 5.17 the same, EVIDENCE Q4). The default kwargs
are `{"use_reentrant": True}` before 5.0 (4.35 to 4.39: no kwargs, torch's default, also
reentrant), `{"use_reentrant": False}` from 5.0. A layer loop that calls it with keywords
meant for the layer (`self._gradient_checkpointing_func(layer.__call__, h,
attention_mask=mask)`) hands them to the reentrant `checkpoint`: `ValueError: Unexpected
keyword arguments: attention_mask`. transformers' own layers pass positional arguments only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import CHECKPOINT_OWN_KEYWORDS
from ckptlint.model.library.transformers import REENTRANT_DEFAULT_VERSIONS
from ckptlint.model.library.transformers import HF_CHECKPOINTING_ATTRIBUTE
from ckptlint.versions import Applies

if TYPE_CHECKING:
    from ckptlint.model.index import ProjectIndex
    from ckptlint.rule import FileContext


@dataclass(frozen=True)
class ReentrantHfCall:
    call: cst.Call
    keywords: tuple[str, ...]  # meant for the checkpointed function
    enabled_at: tuple[str, int]  # a `gradient_checkpointing_enable()` leaving the default kwargs


def calls_hf_checkpointing_func(call: cst.Call) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == HF_CHECKPOINTING_ATTRIBUTE


def reentrant_hf_calls(context: FileContext, calls: list[cst.Call]) -> list[ReentrantHfCall]:
    """The calls among `calls` (of `_gradient_checkpointing_func`) that pass keywords for the
    checkpointed function where the project runs them reentrant: the targeted transformers is
    before 5.0 and every `gradient_checkpointing_enable` of the project leaves the kwargs to
    that default (at least one does; one passing kwargs may choose non-reentrant for all).
    Not for calls that splat `**kwargs` or pass `use_reentrant` themselves (the call's
    keywords override the partial's)."""
    found: list[tuple[cst.Call, tuple[str, ...]]] = []
    for call in calls:
        keywords = tuple(arg.keyword.value for arg in call.args if arg.keyword is not None)
        if any(arg.star == "**" for arg in call.args) or "use_reentrant" in keywords:
            continue
        meant_for_function = tuple(k for k in keywords if k not in CHECKPOINT_OWN_KEYWORDS)
        if meant_for_function:
            found.append((call, meant_for_function))
    if not found or context.versions.applies((REENTRANT_DEFAULT_VERSIONS,)) is not Applies.YES:
        return []
    enablements = context.project.hf_checkpointing_calls
    defaults = [(path, line) for path, line, default in enablements if default]
    if not defaults or len(defaults) != len(enablements):
        return []
    return [ReentrantHfCall(call, keywords, defaults[0]) for call, keywords in found]


def args_only_installer(project: ProjectIndex, owner: str | None) -> str | None:
    """Who installs the `_gradient_checkpointing_func` the code of class `owner` calls, when
    it takes no keywords: diffusers' `ModelMixin.enable_gradient_checkpointing` defines it as
    `def _gradient_checkpointing_func(module, *args)` (diffusers `models/modeling_utils.py`,
    read at its main branch of 2026-11), as does a project class that copies it; transformers'
    `partial(checkpoint, ...)` takes keywords (the reentrant implementation then rejects
    them: `reentrant_hf_calls`)."""
    if owner is None:
        return None
    for ancestor in project.ancestors(owner):
        if ancestor.rsplit(".", 1)[-1] == "ModelMixin" and ancestor.startswith("diffusers."):
            return "diffusers' `ModelMixin.enable_gradient_checkpointing`"
        facts = project.class_named(ancestor)
        summary = project.function_summary(f"{ancestor}.enable_gradient_checkpointing._gradient_checkpointing_func") if facts else None
        if summary is not None and not any(p.kind == "**" for p in summary.parameters) and any(
            p.kind == "*" for p in summary.parameters
        ):
            return f"`{ancestor.rsplit('.', 1)[-1]}.enable_gradient_checkpointing` ({project.path_of(ancestor)})"
    return None


def args_only_call_message(keywords: list[str], installer: str) -> str:
    """Keywords passed to a `_gradient_checkpointing_func(module, *args)` that `installer` defines."""
    return (
        f"keyword argument{'s' if len(keywords) > 1 else ''} {', '.join(f'`{k}`' for k in keywords)} passed to "
        f"`_gradient_checkpointing_func`, which {installer} defines as `(module, *args)`: `TypeError: "
        f"_gradient_checkpointing_func() got an unexpected keyword argument '{keywords[0]}'` on the first "
        "checkpointed training step, whatever the implementation; pass them positionally (in the order the "
        "block's forward takes them), or bind them with `functools.partial(block, ...)`"
    )


def reentrant_call_message(found: ReentrantHfCall) -> str:
    """Keywords passed to transformers' reentrant `_gradient_checkpointing_func`."""
    path, line = found.enabled_at
    names = ",".join(found.keywords)
    return (
        f"keyword argument{'s' if len(found.keywords) > 1 else ''} {', '.join(f'`{k}`' for k in found.keywords)} "
        "passed to `_gradient_checkpointing_func`, transformers' `partial(checkpoint, "
        "**gradient_checkpointing_kwargs)`: `gradient_checkpointing_enable()` leaves the kwargs to the "
        f"default ({path}:{line}), reentrant before transformers 5.0, and torch raises `ValueError: Unexpected "
        f"keyword arguments: {names}` on the first checkpointed step; pass them positionally, as "
        "transformers' own layers do, or enable checkpointing with "
        "`gradient_checkpointing_kwargs={\"use_reentrant\": False}`"
    )
