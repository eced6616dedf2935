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
