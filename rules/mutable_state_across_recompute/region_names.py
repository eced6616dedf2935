"""The names a checkpointed region reads: a lambda's or nested function's free names, and
the attributes of `self` it reads."""

from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import CheckpointSite
from ckptlint.analysis.cst_walk import walk

from .changes import walk_statements


def own_names(region: cst.Lambda | cst.FunctionDef) -> set[str]:
    """The parameters of a lambda or nested function, and the names a nested function binds."""
    params = region.params
    found = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    found |= {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)}
    if isinstance(region, cst.FunctionDef):
        for node in walk_statements(region):
            targets = node.targets if isinstance(node, cst.Assign) else ()
            found |= {t.target.value for t in targets if isinstance(t.target, cst.Name)}
            if isinstance(node, (cst.AugAssign, cst.For)) and isinstance(node.target, cst.Name):
                found.add(node.target.value)
    return found


def names_read(region: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class Reader(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

    walk(region.body if isinstance(region, (cst.Lambda, cst.FunctionDef)) else region, Reader())
    return found


def self_reads(site: CheckpointSite, region: cst.CSTNode | None) -> set[str]:
    if region is None:
        return set()
    found: set[str] = set()

    class Reader(cst.CSTVisitor):
        def visit_Attribute(self, attribute: cst.Attribute) -> None:
            if isinstance(attribute.value, cst.Name) and attribute.value.value == "self":
                found.add(f"self.{attribute.attr.value}")

    walk(region.body if isinstance(region, (cst.Lambda, cst.FunctionDef)) else region, Reader())
    return found
