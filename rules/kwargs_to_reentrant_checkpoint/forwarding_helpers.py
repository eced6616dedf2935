"""Helpers that hand their own `**kwargs` on to torch's `checkpoint` without `use_reentrant`:

    def _checkpoint_forward(self, func, *args, **kwargs):
        if self.gradient_checkpointing and self.training:
            return torch.utils.checkpoint.checkpoint(func, *args, **kwargs)
        return func(*args, **kwargs)

Whether the checkpoint runs reentrant is decided at each call of the helper: a call that
passes `use_reentrant=False` makes it non-reentrant, one that passes keywords for `func`
(`self._checkpoint_forward(self.attn, x, attention_mask=mask)`) and no `use_reentrant`
hands them to the reentrant implementation, which raises `ValueError: Unexpected keyword
arguments: attention_mask`. CKPT032 reports those calls (`helper_calls.py`).

Helpers of the file are found here, with libcst; those of other modules, and functions
decorated by a decorator whose wrapper is such a helper, by the project index
(`ckptlint.model.file_facts.forwarding`), which also brings to the rule a file that calls one without
naming checkpoint.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import CHECKPOINT_OWN_KEYWORDS, CheckpointApi, CheckpointSite, SiteKind
from ckptlint.model.library.torch import Reentrancy


@dataclass(frozen=True)
class ForwardingHelper:
    function: cst.FunctionDef
    site: CheckpointSite  # its checkpoint call, splatting the helper's `**kwargs`
    owner: str | None  # the class it is a method of

    @property
    def name(self) -> str:
        return self.function.name.value

    def accepted(self) -> frozenset[str]:
        """The keywords the helper binds to its own parameters (they never reach checkpoint)."""
        params = self.function.params
        return frozenset(p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params))

    def forwarded(self, call: cst.Call) -> list[str] | None:
        return forwarded_keywords(call, self.accepted())


def forwarded_keywords(call: cst.Call, accepted: Collection[str]) -> list[str] | None:
    """The keywords `call` hands on to the reentrant checkpoint through a helper binding
    `accepted` itself; None when the call may choose the non-reentrant implementation (it
    passes `use_reentrant` other than a literal True, or splats `**`)."""
    if any(arg.star == "**" for arg in call.args):
        return None
    keywords = [arg.keyword.value for arg in call.args if arg.keyword is not None]
    if "use_reentrant" in keywords and "use_reentrant" not in accepted and not passes_reentrant(call):
        return None
    return [k for k in keywords if k not in accepted and k not in CHECKPOINT_OWN_KEYWORDS]


def passes_reentrant(call: cst.Call) -> bool:
    """`helper(..., use_reentrant=True)`: the call chooses the reentrant implementation."""
    return any(
        arg.keyword is not None and arg.keyword.value == "use_reentrant"
        and isinstance(arg.value, cst.Name) and arg.value.value == "True"
        for arg in call.args
    )


def forwarding_helper(site: CheckpointSite, function: cst.FunctionDef | None, owner: str | None) -> ForwardingHelper | None:
    """The helper `site` makes of its enclosing `function`: a plain `checkpoint(fn, *args,
    **kwargs)` call without `use_reentrant` of its own that splats the function's `**`
    parameter (and no other dict)."""
    if function is None or site.kind is not SiteKind.CALL or site.api is not CheckpointApi.CHECKPOINT:
        return None
    star_kwarg = function.params.star_kwarg
    # `use_reentrant=True` written in the call: no caller can change it (a second
    # `use_reentrant` would be a TypeError); any other value chooses for the callers.
    chosen = "use_reentrant" in site.keywords and site.reentrancy is not Reentrancy.EXPLICIT_TRUE
    if not isinstance(star_kwarg, cst.Param) or chosen or site.via_partial is not None:
        return None
    splats = [arg.value for arg in site.node.args if arg.star == "**"]
    if len(splats) != 1 or not (isinstance(splats[0], cst.Name) and splats[0].value == star_kwarg.name.value):
        return None
    return ForwardingHelper(function, site, owner)


def helper_called(call: cst.Call, helpers: dict[tuple[str | None, str], ForwardingHelper], owner: str | None) -> ForwardingHelper | None:
    """The helper a call calls: `self.<method>(...)` in a method of the helper's class, or a
    function of the file by its name."""
    func = call.func
    if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
        return helpers.get((owner, func.attr.value)) if owner is not None else None
    if isinstance(func, cst.Name):
        return helpers.get((None, func.value))
    return None
