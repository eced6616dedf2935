"""Where a finding about a checkpoint site's omitted `use_reentrant` belongs, shared by the
rules that report it (CKPT001, and CKPT002 in FSDP projects)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import CheckpointSite, Reentrancy, SiteKind
from ckptlint.analysis.cst_walk import statements


def reports_implicit_reentrant(site: CheckpointSite, sites: Sequence[CheckpointSite], context=None) -> bool:
    """Whether `site` is where an omitted `use_reentrant` is reported: a direct call, or a
    partial that does not bind it (unless every call through the partial passes it); calls
    through a partial are reported at the partial, where the fix belongs. Not in a branch
    that only runs on torch < 1.11 (with `context`, the file's)."""
    if site.reentrancy is not Reentrancy.IMPLICIT:
        return False
    if context is not None and in_old_torch_branch(context, site.node):
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


# --- branches that run only on torch < 1.11 -------------------------------------------------

# `use_reentrant` exists from torch 1.11: a branch that runs only on older torch cannot pass
# it (diffusers' `if is_torch_version(">=", "1.11.0"): ... else: checkpoint(block, x)`).
_USE_REENTRANT_SINCE = (1, 11)
_VERSION = re.compile(r"^(\d+)\.(\d+)")


def in_old_torch_branch(context, node: cst.CSTNode) -> bool:
    """Whether `node` sits in a branch that only runs on torch older than 1.11: the `else`
    of `if is_torch_version(">=", "1.11.0"):` (or of `version.parse(torch.__version__) >=
    version.parse("1.11")`), the body of `if is_torch_version("<", "1.11"):`."""
    if "version" not in context.text:
        return False
    spans = context.once(_old_torch_spans)  # CKPT001 and CKPT002 both ask
    if not spans:
        return False
    line = context.position(node).start.line
    return any(start <= line <= end for start, end in spans)


def _old_torch_spans(context) -> list[tuple[int, int]]:
    spans = []
    for node in statements(context.module):
        if isinstance(node, cst.If):
            test = _torch_version_test(node.test)
            if test is not None:
                operator, version = test
                newer = operator in (">=", ">")
                since = version <= _USE_REENTRANT_SINCE if operator in (">=", "<") else version < _USE_REENTRANT_SINCE
                old = node.orelse if newer else node.body
                if since and old is not None:
                    position = context.position(old)
                    spans.append((position.start.line, position.end.line))
    return spans


def _torch_version_test(test: cst.BaseExpression) -> tuple[str, tuple[int, int]] | None:
    """(operator, version) for `is_torch_version(">=", "1.11.0")` or a comparison of
    `torch.__version__` (possibly parsed) with a version string; None otherwise."""
    if isinstance(test, cst.Call) and len(test.args) == 2:
        name = test.func.attr.value if isinstance(test.func, cst.Attribute) else getattr(test.func, "value", "")
        operator, version = (_string(arg.value) for arg in test.args)
        if name == "is_torch_version" and operator in (">=", ">", "<", "<=") and version is not None:
            parsed = _VERSION.match(version)
            return (operator, (int(parsed[1]), int(parsed[2]))) if parsed else None
        return None
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        operator = cst.Module([]).code_for_node(test.comparisons[0].operator).strip()
        left, right = test.left, test.comparisons[0].comparator
        if "torch.__version__" not in cst.Module([]).code_for_node(left) or operator not in (">=", ">", "<", "<="):
            return None
        version = _string(right) or next((_string(a.value) for a in getattr(right, "args", ()) if _string(a.value)), None)
        parsed = _VERSION.match(version) if version else None
        return (operator, (int(parsed[1]), int(parsed[2]))) if parsed else None
    return None


def _string(expr: cst.BaseExpression) -> str | None:
    return expr.evaluated_value if isinstance(expr, cst.SimpleString) else None
