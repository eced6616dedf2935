"""What a checkpoint recomputes: from a checkpoint site to the module classes and methods its
region runs, through the project index's class summaries.

    checkpoint(self.block, x)         -> the classes `self.block` is built from in `__init__`
    checkpoint(self._forward, x)      -> that method: its own calls, the modules it uses
    checkpoint(lambda t: ..., x)      -> the `self.<attr>` modules and methods the body uses
    for blk in self.blocks: checkpoint(blk, x) -> the classes in `self.blocks`
    checkpoint_sequential(self.seq, n, x)      -> the members of `self.seq` (with `self.seq`
                                                  written member by member and `n` a literal:
                                                  those of the first n - 1 segments)

Anything else is not resolved, and rules stay silent about it.
"""

from __future__ import annotations

from dataclasses import dataclass
import libcst as cst

from ckptlint.analysis.checkpoint_sites import SITE_REQUIRES, SITE_TRIGGERS, CheckpointApi, CheckpointSite, SiteKind
from ckptlint.analysis.fsdp import absolute_names
from ckptlint.model.index import ProjectIndex
from ckptlint.model.names import module_name
from ckptlint.rule import Rule



@dataclass(frozen=True)
class Region:
    """The parts of a class a checkpoint site recomputes."""

    owner: str  # absolute name of the class holding the site
    attributes: frozenset[str]  # its module attributes the region runs
    methods: frozenset[str]  # its methods the region runs
    extra: tuple[str, ...] = ()  # what the callable's own body does (for lambdas), described
    # Attributes of which the region runs only some members (checkpoint_sequential's
    # checkpointed segments): attribute -> the classes of those members.
    members: tuple[tuple[str, tuple[str, ...]], ...] = ()


def _modules(region: Region, project: ProjectIndex) -> dict[str, tuple[str, ...]]:
    """The owner's module attributes, narrowed to the members the region runs."""
    return {**project.class_modules(region.owner), **dict(region.members)}


def sequential_region(region: Region, site: CheckpointSite, project: ProjectIndex) -> Region:
    """`checkpoint_sequential(self.seq, segments, x)` checkpoints all but the last segment
    (torch runs that one plainly): with `self.seq` written member by member and `segments`
    a literal, the region is the members of the checkpointed segments only."""
    if len(region.attributes) != 1 or region.methods or site.via_partial is not None:
        return region
    (attribute,) = region.attributes
    members = project.class_sequence(region.owner, attribute)
    positional = [arg for arg in site.node.args if arg.keyword is None and not arg.star]
    segments = positional[1].value if len(positional) > 1 else next(
        (arg.value for arg in site.node.args if arg.keyword is not None and arg.keyword.value == "segments"), None
    )
    if members is None or not isinstance(segments, cst.Integer) or int(segments.evaluated_value) < 1:
        return region
    count = int(segments.evaluated_value)
    checkpointed = members[: (len(members) // count) * (count - 1)]
    classes = tuple(dict.fromkeys(cls for member in checkpointed for cls in member))
    return Region(region.owner, region.attributes, region.methods, region.extra, ((attribute, classes),))


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
    function: cst.BaseExpression | None,
    owner: str | None,
    project: ProjectIndex,
    loop_sources: dict[str, cst.BaseExpression],
) -> Region | None:
    """The region of a checkpointed callable written inside class `owner` (absolute), or
    None when not resolvable."""
    if owner is None or function is None:
        return None
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
    modules = _modules(region, project)
    found: list[str] = []
    for attribute in sorted(_region_attributes(region, project)):
        for cls in modules[attribute]:
            found.extend(f"{short}.{attribute} -> {path}" for path in project.running_stats(cls, extra))
    return list(dict.fromkeys(found))


def _region_attributes(region: Region, project: ProjectIndex) -> set[str]:
    """The module attributes the region runs: its own, and those its methods use."""
    modules = _modules(region, project)
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
    """Paths to the random operations the region runs (a module it puts in eval mode draws
    none)."""
    short = region.owner.rsplit(".", 1)[-1]
    found = [
        f"{short}.{m.name}: {random}"
        for m in _reachable_methods(region.owner, list(region.methods), project)
        for random in m.random
    ]
    modules = _modules(region, project)
    for attribute in sorted(_region_attributes(region, project)):
        for cls in modules[attribute]:
            found.extend(f"{short}.{attribute} -> {path}" for path in project.randomness(cls, extra_random))
    return list(dict.fromkeys(found))


def _reachable_methods(owner: str, start: list[str], project: ProjectIndex) -> list:
    """The methods of `owner` reachable from `start` through `self.<method>(...)` calls."""
    found, pending, seen = [], list(start), set()
    while pending:
        name = pending.pop()
        if name in seen:
            continue
        seen.add(name)
        method = project.class_method(owner, name)
        if method is not None:
            found.append(method)
            pending.extend(method.methods)
    return found


def _class_mutations(name: str, project: ProjectIndex, seen: set[str]) -> list[str]:
    """State writes an instance's `forward` makes, transitively through its modules."""
    if name in seen or project.class_named(name) is None:
        return []
    seen.add(name)
    short = name.rsplit(".", 1)[-1]
    found = [f"{short}.{m.name}: {what}" for m in _reachable_methods(name, ["forward"], project) for what in m.mutations]
    modules = project.class_modules(name)
    used = {a for m in _reachable_methods(name, ["forward"], project) for a in (*m.attributes, *m.methods) if a in modules}
    for attribute in sorted(used):
        for cls in modules[attribute]:
            found.extend(f"{short}.{attribute} -> {path}" for path in _class_mutations(cls, project, seen))
    return found


def class_region(class_name: str) -> Region:
    """The region of a wrapped instance: its whole forward."""
    return Region(class_name, frozenset(), frozenset({"forward"}))


def region_mutations(region: Region, project: ProjectIndex) -> list[str]:
    """State the region writes that outlives the call, as paths."""
    short = region.owner.rsplit(".", 1)[-1]
    found = [
        f"{short}.{m.name}: {what}" for m in _reachable_methods(region.owner, list(region.methods), project)
        for what in m.mutations
    ]
    modules = _modules(region, project)
    for attribute in sorted(_region_attributes(region, project)):
        for cls in modules[attribute]:
            found.extend(f"{short}.{attribute} -> {path}" for path in _class_mutations(cls, project, {region.owner}))
    return list(dict.fromkeys(found))


def mentions_checkpointing(project: ProjectIndex, relative_path: str, settings, text: str) -> bool:
    """Whether a file can run something checkpointed: it names torch's checkpoint, wraps
    classes for checkpointing, or calls one of the project's own checkpoint wrappers (or a
    configured `checkpoint-functions` entry)."""
    if any(w.decode() in text for w in SITE_TRIGGERS) and all(w.decode() in text for w in SITE_REQUIRES):
        return True
    facts = project.files.get(relative_path)
    if facts is not None and facts.wrapped_classes:
        return True
    names = (*project.checkpoint_wrappers, *settings.checkpoint_functions)
    return any(f"{name.rsplit('.', 1)[-1]}(" in text for name in names)


class CheckpointingGate:
    """The gate of the rules about what runs checkpointed: torch's checkpoint named, or the
    project's own checkpoint wrappers, classes wrapped for checkpointing, `checkpoint-functions`."""

    triggers = (*SITE_TRIGGERS, b"checkpoint", b"ckpt")
    requires = ()
    uses_project = True

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        return mentions_checkpointing(project, relative_path, settings, text)


class RegionRule(CheckpointingGate, Rule):
    """Base of the rules about what a checkpoint site recomputes: tracks, during the
    traversal, the class and the loops each call sits in, and resolves a site's region."""

    def __init__(self, context) -> None:
        super().__init__(context)
        self._classes: list[str] = []
        self._call_class: dict[cst.Call, str] = {}
        self._loops: list[dict[str, cst.BaseExpression]] = [{}]
        self._call_loops: dict[cst.Call, dict[str, cst.BaseExpression]] = {}
        self._calls: list[cst.Call] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node.name.value)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_For(self, node: cst.For) -> None:
        sources = dict(self._loops[-1])
        if isinstance(node.target, cst.Name):
            sources[node.target.value] = node.iter
        self._loops.append(sources)

    def leave_For(self, original_node: cst.For) -> None:
        self._loops.pop()

    def visit_Call(self, node: cst.Call) -> None:
        self._calls.append(node)
        if self._classes:
            self._call_class[node] = ".".join(self._classes)
            self._call_loops[node] = self._loops[-1]

    def site_region(self, site: CheckpointSite) -> Region | None:
        if site.kind is not SiteKind.CALL:
            return None
        region = self._region_at(site.node, site.function)
        if region is not None and site.api is CheckpointApi.CHECKPOINT_SEQUENTIAL:
            return sequential_region(region, site, self.context.project)
        return region

    def _region_at(self, call: cst.Call, function: cst.BaseExpression | None) -> Region | None:
        class_name = self._call_class.get(call)
        owner = f"{module_name(self.context.relative_path)}.{class_name}" if class_name else None
        return region_of(function, owner, self.context.project, self._call_loops.get(call, {}))

    # --- regions not given to torch's checkpoint directly ---------------------------------

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        region = self.site_region(site)
        if region is not None:
            self.check_region(site.node, region, site.api.short_name)

    def check_region(self, node: cst.Call, region: Region, api: str) -> None:
        """Report what the rule finds in `region`, checkpointed by `node` (`api` names it)."""

    def check_class(self, node: cst.Call, class_name: str, api: str) -> None:
        """Report what the rule finds in instances of `class_name`, wrapped by `node` (by
        default: their whole forward as a region)."""
        self.check_region(node, class_region(class_name), api)

    def finish(self) -> None:
        project = self.context.project
        configured = set(self.context.settings.checkpoint_functions)
        # Calls of the project's own checkpoint wrappers (timm's `checkpoint_seq`-style).
        for call in self._calls:
            names = absolute_names(self.context, call.func) if self._call_class.get(call) else set()
            positions = {0 if n in configured else project.checkpointed_parameter(n) for n in names}
            if len(positions) != 1 or None in positions:
                continue
            positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
            position = positions.pop()
            if position < len(positional):
                region = self._region_at(call, positional[position].value)
                if region is not None:
                    self.check_region(call, region, _code(call.func))
        # Classes this file wraps with checkpoint_wrapper / apply_activation_checkpointing.
        facts = project.files.get(self.context.relative_path)
        for wrapped in facts.wrapped_classes if facts is not None else ():
            node = next(
                (c for c in self._calls if self.context.position(c).start.line == wrapped.line
                 and _code(c.func).rsplit(".", 1)[-1] in (wrapped.api, "checkpoint_wrapper", "apply_activation_checkpointing")),
                None,
            )
            resolved = project.class_named(wrapped.name)
            if node is not None and resolved is not None:
                self.check_class(node, resolved.name, wrapped.api)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def shown(paths: list[str], limit: int = 3) -> str:
    return "; ".join(paths[:limit]) + (f"; and {len(paths) - limit} more" if len(paths) > limit else "")
