"""Where a finding about a checkpoint site's omitted `use_reentrant` belongs, shared by the
rules that report it (CKPT001, and CKPT002 in FSDP projects)."""

from __future__ import annotations

from collections.abc import Sequence

from ckptlint.analysis.checkpoint_sites import CheckpointSite, Reentrancy, SiteKind


def reports_implicit_reentrant(site: CheckpointSite, sites: Sequence[CheckpointSite]) -> bool:
    """Whether `site` is where an omitted `use_reentrant` is reported: a direct call, or a
    partial that does not bind it (unless every call through the partial passes it); calls
    through a partial are reported at the partial, where the fix belongs."""
    if site.reentrancy is not Reentrancy.IMPLICIT:
        return False
    if site.kind is SiteKind.CALL and (site.via_partial is not None or site.imported_partial is not None):
        return False
    if site.kind is SiteKind.PARTIAL:
        calls = [
            "use_reentrant" in s.keywords or s.has_star_kwargs
            for s in sites
            if s.kind is SiteKind.CALL and s.via_partial is site.node
        ]
        if calls and all(calls):
            return False
    return True


def reports_explicit_reentrant(site: CheckpointSite) -> bool:
    """Whether `site` is where a written `use_reentrant=True` is reported: the call or
    partial that writes it (calls through a partial that binds it are not reported again)."""
    keyword = site.keywords.get("use_reentrant")
    return site.reentrancy is Reentrancy.EXPLICIT_TRUE and keyword is not None and keyword.call is site.node
