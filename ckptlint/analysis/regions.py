"""What a checkpoint recomputes: from a checkpoint site to the module classes and methods its
region runs, through the project index's class summaries.

    checkpoint(self.block, x)         -> the classes `self.block` is built from in `__init__`
    checkpoint(self._forward, x)      -> that method: its own calls, the modules it uses
    checkpoint(lambda t: ..., x)      -> the `self.<attr>` modules and methods the body uses
    for blk in self.blocks: checkpoint(blk, x) -> the classes in `self.blocks`
    checkpoint_sequential(self.seq, n, x)      -> the members of `self.seq`

Anything else is not resolved, and rules stay silent about it.
"""

from __future__ import annotations

from dataclasses import dataclass
import libcst as cst

from ckptlint.analysis.checkpoint_sites import CheckpointSite
from ckptlint.project import ProjectIndex



@dataclass(frozen=True)
class Region:
    """The parts of a class a checkpoint site recomputes."""

    owner: str  # absolute name of the class holding the site
    attributes: frozenset[str]  # its module attributes the region runs
    methods: frozenset[str]  # its methods the region runs
    extra: tuple[str, ...] = ()  # what the callable's own body does (for lambdas), described


def _self_uses(node: cst.CSTNode) -> tuple[set[str], set[str]]:
    """`self.<attr>` read and `self.<method>(...)` called in a lambda or function body."""
    attributes: set[str] = set()
    methods: set[str] = set()

    class Reader(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            func = call.func
            if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
                methods.add(func.attr.value)

        def visit_Attribute(self, attribute: cst.Attribute) -> None:
            if isinstance(attribute.value, cst.Name) and attribute.value.value == "self":
                attributes.add(attribute.attr.value)

    node.visit(Reader())
    return attributes, methods


def region_of(
    site: CheckpointSite, owner: str | None, project: ProjectIndex, loop_sources: dict[str, cst.BaseExpression]
) -> Region | None:
    """The region of a site inside class `owner` (absolute), or None when not resolvable."""
    if owner is None or site.function is None:
        return None
    function = site.function
    if isinstance(function, cst.Attribute) and isinstance(function.value, cst.Name) and function.value.value == "self":
        name = function.attr.value
        if name in project.class_modules(owner):
            return Region(owner, frozenset({name}), frozenset())
        if project.class_method(owner, name) is not None:
            return Region(owner, frozenset(), frozenset({name}))
        return None
    if isinstance(function, cst.Name) and function.value in loop_sources:
        iterated = loop_sources[function.value]
        if isinstance(iterated, cst.Attribute) and isinstance(iterated.value, cst.Name) and iterated.value.value == "self":
            if iterated.attr.value in project.class_modules(owner):
                return Region(owner, frozenset({iterated.attr.value}), frozenset())
        return None
    if isinstance(function, (cst.Lambda,)):
        attributes, methods = _self_uses(function.body)
        modules = project.class_modules(owner)
        return Region(owner, frozenset(a for a in attributes if a in modules), frozenset(methods))
    return None


def region_running_stats(region: Region, project: ProjectIndex, extra: frozenset[str] = frozenset()) -> list[str]:
    """Paths to the modules with running statistics the region runs."""
    short = region.owner.rsplit(".", 1)[-1]
    modules = project.class_modules(region.owner)
    found: list[str] = []
    for attribute in sorted(_region_attributes(region, project)):
        for cls in modules[attribute]:
            found.extend(f"{short}.{attribute} -> {path}" for path in project.running_stats(cls, extra))
    return list(dict.fromkeys(found))


def _region_attributes(region: Region, project: ProjectIndex) -> set[str]:
    """The module attributes the region runs: its own, and those its methods use."""
    modules = project.class_modules(region.owner)
    attributes = set(region.attributes)
    evaluated: set[str] = set()
    pending, seen = list(region.methods), set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        method = project.class_method(region.owner, name)
        if method is None:
            if name in modules:
                attributes.add(name)
            continue
        attributes |= {a for a in method.attributes if a in modules}
        evaluated |= set(method.evaluated)
        pending.extend(method.methods)
    # A module the region itself puts in eval mode updates no running statistics.
    return attributes - evaluated


def region_randomness(region: Region, project: ProjectIndex, extra_random: frozenset[str] = frozenset()) -> list[str]:
    """Paths to the random operations the region runs."""
    short = region.owner.rsplit(".", 1)[-1]
    modules = project.class_modules(region.owner)
    found: list[str] = []
    pending = list(region.methods)
    seen_methods: set[str] = set()
    attributes = set(region.attributes)
    while pending:
        name = pending.pop()
        if name in seen_methods:
            continue
        seen_methods.add(name)
        method = project.class_method(region.owner, name)
        if method is None:
            if name in modules:
                attributes.add(name)  # `self.drop(x)`: a module called
            continue
        found.extend(f"{short}.{method.name}: {random}" for random in method.random)
        attributes |= {a for a in method.attributes if a in modules}
        pending.extend(method.methods)
    for attribute in sorted(attributes):
        for cls in modules[attribute]:
            found.extend(f"{short}.{attribute} -> {path}" for path in project.randomness(cls, extra_random))
    return list(dict.fromkeys(found))
