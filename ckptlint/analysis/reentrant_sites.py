"""Whether a torch checkpoint site runs the reentrant implementation, said once for the rules
whose finding rests on it (CKPT035; CKPT006 and CKPT007 ask the same): `use_reentrant=True`
written at the call or bound by the partial it goes through, `use_reentrant` omitted (torch
2.13 still falls back to reentrant, with its warning; torch < 1.11 has no other), or an
expression the project only ever sets to True (`SiteScopes.configured_reentrant`). And
whether the usual fix, `use_reentrant=False` at the call, can be written there."""

from __future__ import annotations

from dataclasses import dataclass

from ckptlint.analysis.checkpoint_sites import CheckpointSite, SiteKind
from ckptlint.analysis.reentrancy import in_old_torch_branch
from ckptlint.model.library.torch import Reentrancy
from ckptlint.versions import Applies, VersionRange

# `use_reentrant` exists from torch 1.11 (pytorch/pytorch#65537): before, passing it raises.
TORCH_WITH_THE_FLAG = VersionRange.of("torch", min="1.11")


@dataclass(frozen=True)
class ReentrantRun:
    why: str  # for a message: "`use_reentrant=True`", "`use_reentrant` omitted: torch defaults to reentrant"
    fixable: bool  # `use_reentrant=False` may be written at the call


def reentrant_run(rule, site: CheckpointSite) -> ReentrantRun | None:
    """How the call `site` runs reentrant, or None when it does not or that is not known
    (`rule`: a `SiteScopes` rule, whose model of the file resolves configured flags)."""
    if site.kind is not SiteKind.CALL:
        return None
    context = rule.context
    flag_exists = context.versions.applies((TORCH_WITH_THE_FLAG,)) is not Applies.NO
    reentrancy = site.reentrancy
    if reentrancy is Reentrancy.EXPLICIT_TRUE:
        keyword = site.keywords["use_reentrant"]
        if keyword.call is site.node:
            return ReentrantRun("`use_reentrant=True`", True)
        if keyword.call is None and site.imported_partial is None:
            return ReentrantRun("`use_reentrant=True` in the dict splatted into the call", False)
        bound_by = f"`{site.imported_partial}`" if site.imported_partial else "the `functools.partial` it calls"
        splat = any(arg.star == "**" for arg in site.node.args)
        return ReentrantRun(f"`use_reentrant=True`, bound by {bound_by}", not splat)
    if reentrancy is Reentrancy.IMPLICIT:
        old = in_old_torch_branch(context, site.node)
        return ReentrantRun("`use_reentrant` omitted: torch defaults to reentrant", flag_exists and not old)
    if reentrancy is Reentrancy.UNKNOWN:
        configured = rule.configured_reentrant(site)
        return ReentrantRun(configured, False) if configured is not None else None
    return None
