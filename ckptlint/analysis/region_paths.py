"""Paths from a checkpointed region to what a rule looks for in it: the modules with running
statistics (BatchNorm...), the random operations, the writes to state that outlive the call,
and the region's own checkpoint calls (a nested region), each as a path naming every step
(`Stage.blocks -> ConvBNAct.bn -> (torch.nn.BatchNorm2d)`), through the project model."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from ckptlint.model.evaluation.denotation import Denotation
from ckptlint.model.file_facts.facts import CheckpointCall
from ckptlint.model.index import ProjectIndex
from ckptlint.model.library.combined import NORMS_WITH_RUNNING_STATS, RANDOM_MODULES
from ckptlint.model.library.torch import RANDOM_SAMPLING_FUNCTIONS, RANDOM_TENSOR_METHODS, STATE_UPDATING_WRAPPERS
from ckptlint.model.library.transformers import TRANSFORMERS_RANDOM_LAYERS
from ckptlint.model.file_facts.method_behaviour import SUPER_CALL
from ckptlint.model.file_facts.unrestored_draws import NUMPY_RNG, PYTHON_RNG, SEEDS, UNRESTORED
from ckptlint.model.syntax.names import is_test_path, module_name
from ckptlint.model.recompute_reads import forward_checkpoint_calls
from ckptlint.model.library.openmmlab import conv_module_norms
from ckptlint.model.library.torchvision import torchvision_holds
from ckptlint.model.form.values import ClassRef, Constant, FunctionRef, Instance, Lambda, Sequence, ordering_key

_MAX_CALL_DEPTH = 6
_SAMPLERS = frozenset(name.rsplit(".", 1)[-1] for name in RANDOM_SAMPLING_FUNCTIONS)

@dataclass(frozen=True)
class Region:
    """What one checkpoint recomputes."""

    owner: str | None  # absolute name of the class holding the site, if any
    label: str | None  # how the site names it, prefixing the paths (`Stage.blocks`)
    runs: frozenset  # module instances, functions and lambdas (`ckptlint.model.evaluation.denotation`)


def class_region(project: ProjectIndex, class_name: str) -> Region:
    """The region of a wrapped instance: its whole forward."""
    return Region(class_name, None, frozenset({project.denotation.instance(class_name)}))


def wrapped_class_region(project: ProjectIndex, class_name: str) -> Region | None:
    """The region of the instances of a class wrapped for checkpointing: a project class's
    whole forward, or a library layer the library facts describe (`BertLayer`)."""
    resolved = project.class_named(class_name)
    if resolved is not None:
        return class_region(project, resolved.name)
    if class_name in RANDOM_MODULES or class_name in NORMS_WITH_RUNNING_STATS:
        return Region(class_name, None, frozenset({Instance(class_name)}))
    return None


def forward_regions(project: ProjectIndex, class_name: str) -> list[tuple[int, Region]]:
    """The regions a module class's `forward` checkpoints, seen from code that calls the
    module (no syntax tree of its file): (checkpoint line, region) for each checkpoint call
    whose callable the model follows: a submodule (`self.head`, each of `self.blocks`), a
    method, a function nested in the method."""
    denotation = project.denotation
    instance = denotation.instance(class_name)
    short = instance.short_name
    found = []
    for owner, method_name, call in forward_checkpoint_calls(project, class_name):
        written = call.callable.removesuffix("[*]")
        if written.startswith("self.") and written.count(".") == 1:
            expr, label = ("attr", ("name", "self"), written[5:]), f"{short}.{written[5:]}"
        elif written and "." not in written:
            expr, label = ("name", written), None
        else:
            continue
        path = project.path_of(f"{owner}.{method_name}")
        if path is None:
            continue
        frame = denotation.frame_of(f"{owner}.{method_name}", module_name(path), instance)
        runs = denotation.runs(denotation.evaluate(expr, frame))
        if runs:
            found.append((call.line, Region(class_name, label, runs)))
    return found


def region_running_stats(region: Region, project: ProjectIndex, extra: frozenset[str] = frozenset()) -> list[str]:
    """Paths to the modules with running statistics (BatchNorm...) the region runs."""
    return _RegionPaths(project, "statistics", extra).of(region)


def region_randomness(
    region: Region, project: ProjectIndex, extra: frozenset[str] = frozenset(), *, mode_dependent: bool = False
) -> list[str]:
    """Paths to the random operations the region runs (a module put in eval mode draws none);
    `mode_dependent`: only those eval mode turns off (dropout, not `torch.randn_like`)."""
    paths = _RegionPaths(project, "randomness", extra)
    paths.mode_dependent = mode_dependent
    return paths.of(region)


def region_unrestored_randomness(region: Region, project: ProjectIndex) -> list[str]:
    """Paths to the draws the region makes that torch's checkpoint does not replay (Python's
    `random`, NumPy's, an explicit `generator=`), each ending at the draw's file:line; not
    those of a global generator the region seeds itself (each run draws the same)."""
    paths = _RegionPaths(project, "unrestored", frozenset()).of(region)
    seeded = {rng for rng in (PYTHON_RNG, NUMPY_RNG) for path in paths if f"{SEEDS.removeprefix(UNRESTORED)}{rng}" in path}
    return [
        path for path in paths
        if SEEDS.removeprefix(UNRESTORED) not in path and not any(f", {rng} (" in path for rng in seeded)
    ]


def region_mutations(region: Region, project: ProjectIndex) -> list[str]:
    """State the region writes that outlives the call, as paths."""
    return _RegionPaths(project, "mutations", frozenset()).of(region)


def region_checkpoints(
    region: Region, project: ProjectIndex, counts: Callable[[CheckpointCall, Instance | None, str], bool]
) -> list[str]:
    """Paths to the `checkpoint` calls the region runs itself (a module that checkpoints its
    own forward when run inside it): the calls `counts` accepts, given the module instance
    they run in (None in a function) and the name of the method holding them."""
    return _RegionPaths(project, "checkpoints", frozenset(), counts).of(region)


class _RegionPaths:
    """Paths from a region to what one rule looks for: modules with running statistics,
    random operations, writes to state, or checkpoint calls of its own. A path names each step (`Stage.blocks ->
    ConvBNAct.bn -> (torch.nn.BatchNorm2d)`); containers are transparent."""

    def __init__(self, project: ProjectIndex, kind: str, extra: frozenset[str], counts=None) -> None:
        self.project = project
        self.counts = counts  # `checkpoints`: which calls count
        self.denotation: Denotation = project.denotation
        self.kind = kind
        self.extra = extra
        self.mode_dependent = False  # `randomness`: only what eval mode turns off
        self._defined_in: dict[int, str] = {}  # id of a method's facts -> the class defining it
        self._memo: dict = {}

    def of(self, region: Region) -> list[str]:
        found: list[str] = []
        for value in sorted(region.runs, key=ordering_key):
            if isinstance(value, Instance):
                paths = self.instance(value, frozenset())
                found.extend(f"{region.label} -> {p}" if region.label else p for p in paths)
            elif isinstance(value, FunctionRef):
                found.extend(self.function(value, 0))
            elif isinstance(value, Lambda):
                for expr in value.calls:
                    label = _label(expr, "self", value.frame.self_instance)
                    for callee in sorted(self.denotation.evaluate(expr, value.frame), key=ordering_key):
                        found.extend(self.callee(callee, label, 0))
        found = list(dict.fromkeys(found))
        constructed = _constructed_at(self.denotation, region.owner, found)
        if found and constructed:
            found[0] = f"{found[0]}, {constructed}"
        return found

    # --- module instances --------------------------------------------------------------------

    def instance(self, instance: Instance, seen: frozenset) -> tuple[str, ...]:
        key = instance
        if key in self._memo:
            return self._memo[key]
        if instance in seen or len(seen) > 12:
            return ()
        self._memo[key] = ()  # a cycle contributes nothing
        result = tuple(dict.fromkeys(self._instance_paths(instance, seen | {instance})))
        self._memo[key] = result
        return result

    def _instance_paths(self, instance: Instance, seen: frozenset) -> Iterator[str]:
        if instance.cls in STATE_UPDATING_WRAPPERS:  # `spectral_norm(conv)`: its hook writes buffers
            if self.kind == "mutations":
                yield f"({instance.short_name}: its power iteration updates `weight_u` / `weight_v` in place)"
            for module in sorted(instance.argument("module") or (), key=ordering_key):
                if isinstance(module, Instance) and self.kind != "mutations":
                    yield from self.instance(module, seen)
            return
        lineage = self.project.ancestors(instance.cls)
        if self._is_leaf(instance, lineage):
            library = next((name for name in lineage if name in TRANSFORMERS_RANDOM_LAYERS), None)
            if library:
                yield f"({instance.cls}: dropout on under its configuration's defaults)"
            elif torchvision_holds(instance.cls, self.kind) is not None:
                model, _, child = instance.cls.partition(".<child>.")
                what = "BatchNorm" if self.kind == "statistics" else "dropout / stochastic depth"
                yield f"({model}(){'.' + child if child else ''}: {what} inside)"
            else:
                yield f"({instance.cls})"
            return
        norms = conv_module_norms(instance)
        if norms:  # mmcv's `ConvModule(..., norm_cfg=dict(type="BN"))`
            for norm in sorted(norms, key=ordering_key):
                yield from (f"{instance.short_name}.norm -> {p}" for p in self.instance(norm, seen))
            return
        if instance.members is not None:
            for members in instance.members:
                for member in sorted(members, key=ordering_key):
                    if isinstance(member, Instance):
                        yield from self.instance(member, seen)
            return
        if self.project.class_named(instance.cls) is None:
            return
        if self.kind == "mutations" and set(lineage) & NORMS_WITH_RUNNING_STATS:
            return  # a BatchNorm subclass's statistics are CKPT010's (`statistics`)
        short = instance.short_name
        methods = self._reachable_methods(instance.cls, ["forward"])
        if self.kind in ("randomness", "unrestored"):
            yield from (
                f"{short}.{m.name}: {r}" for m in methods
                for r in self._random(m, instance, self._defined_in.get(id(m), instance.cls))
            )
        if self.kind == "unrestored":
            yield from self._called_functions(instance, methods)
        elif self.kind == "mutations":
            yield from (f"{short}.{m.name}: {w}" for m in methods for w in m.mutations)
        elif self.kind == "checkpoints":
            yield from (f"{short}.{m.name}: {c}" for m in methods for c in self._checkpoints(m, instance))
        # A module its own forward puts in eval mode (a frozen BatchNorm) updates no
        # statistics and draws no random numbers.
        evaluated = {a for m in methods for a in m.evaluated}
        used = {a for m in methods for a in (*m.attributes, *m.methods)}
        for attribute, children in self.denotation.children(instance).items():
            if attribute in evaluated or (self.kind == "mutations" and attribute not in used):
                continue
            shown_as = f"{short}.{attribute}" if attribute != "*" else f"{short}.<added module>"
            for child in sorted(children, key=ordering_key):
                yield from (f"{shown_as} -> {p}" for p in self.instance(child, seen))

    def _checkpoints(self, method, instance: Instance | None, function: str | None = None) -> Iterator[str]:
        """The method's own `checkpoint` calls that count, each as `checkpoint` at file:line."""
        owner = instance.cls if instance is not None else (function or "").rsplit(".", 1)[0]
        path = self.project.path_of(owner) or "?"
        for call in method.checkpoints:
            if self.counts(call, instance, method.name):
                how = {True: "reentrant", False: "non-reentrant", None: "its implementation not known"}[call.reentrant]
                yield f"`checkpoint` at {path}:{call.line}, {how}"

    def _is_leaf(self, instance: Instance, lineage: list[str]) -> bool:
        library = torchvision_holds(instance.cls, self.kind)
        if library is not None:
            return library  # a torchvision model or one of its children (`resnet50().layer1`)
        names = set(lineage) | {name.rsplit(".", 1)[-1] for name in lineage}
        if self.kind == "statistics":
            if not (names & (NORMS_WITH_RUNNING_STATS | self.extra)):
                return False
            tracked = instance.argument("track_running_stats")
            if tracked and all(isinstance(v, Constant) for v in tracked):
                return any(v.value for v in tracked)
            return not any("InstanceNorm" in name for name in lineage) or names & self.extra != set()
        if self.kind == "randomness":
            if not (names & (RANDOM_MODULES | self.extra)):
                return False
            probability = instance.argument("p", 0)
            return not (probability and all(isinstance(v, Constant) and v.value == 0 for v in probability))
        return False

    def _reachable_methods(self, class_name: str, start: list[str]) -> list:
        """The methods `start` runs on an instance of the class: those they call on `self`,
        and a base's through `super()` (looked up after the class that calls it)."""
        found, pending, seen = [], [(name, None) for name in start], set()
        while pending:
            name, after = pending.pop()
            if (name, after) in seen:
                continue
            seen.add((name, after))
            defined = self.project.class_method_in(class_name, name, after)
            if defined is not None:
                owner, method = defined
                found.append(method)
                self._defined_in[id(method)] = owner
                pending.extend(
                    (called.removeprefix(SUPER_CALL), owner) if called.startswith(SUPER_CALL) else (called, None)
                    for called in method.methods
                )
        return found

    def _random(self, method, owner: Instance | None, defined_in: str | None = None) -> Iterator[str]:
        """A method's random operations, less those whose probability is an attribute the
        instance holds only zero in (`F.dropout(x, p=self.drop)` with `drop` a config's
        default 0.0): dropout with p=0 draws no random numbers (measured on torch 2.13).
        `unrestored`: only the draws torch does not replay, at their file:line (`defined_in`:
        the class whose file holds the method)."""
        zero_attributes = dict(method.random_attributes)
        kept = []
        for description in method.random:
            if description.startswith(UNRESTORED) is not (self.kind == "unrestored"):
                continue
            if self.mode_dependent and _draws_in_eval(description):
                continue
            attribute = zero_attributes.get(description)
            if attribute is not None and owner is not None:
                values = self.denotation.attribute(owner, attribute)
                if values and all(isinstance(v, Constant) and v.value == 0 and v.value is not False for v in values):
                    continue
                if self.kind == "unrestored" and values and all(isinstance(v, Constant) and v.value is None for v in values):
                    continue  # `generator=self.gen` holding None: torch's default generator
            kept.append(description)
        yield from self._unrestored(kept, defined_in) if self.kind == "unrestored" else kept

    def _called_functions(self, instance: Instance, methods: list) -> Iterator[str]:
        """`unrestored`: what the functions outside classes that the methods call draw, in
        any file (`feature_jitter(x, sigma)` imported from `.noise`), `self`'s own left to the
        methods and children."""
        for method in methods:
            name = f"{self._defined_in.get(id(method), instance.cls)}.{method.name}"
            summary, path = self.denotation.summary(name), self.project.path_of(name)
            if summary is None or path is None:
                continue
            frame = self.denotation.frame_of(name, module_name(path), instance)
            for callee, line in summary.calls:
                if callee[0] == "attr" and callee[1] == ("name", summary.self_name):
                    continue
                for value in sorted(self.denotation.evaluate(callee, replace(frame, before=line + 1)), key=ordering_key):
                    if isinstance(value, FunctionRef) and (value.frame is None or value.frame.self_instance is None):
                        yield from (f"{instance.short_name}.{method.name} -> {p}" for p in self.function(value, 1))

    def _unrestored(self, descriptions, defined_in: str | None) -> Iterator[str]:
        """The draws torch does not replay among `descriptions`, `(line N)` shown as the
        file:line of the module or class `defined_in` names."""
        path = self.project.path_of(defined_in) if defined_in else None
        for description in descriptions:
            if description.startswith(UNRESTORED):
                shown = description.removeprefix(UNRESTORED)
                yield re.sub(r"\(line (\d+)\)$", rf"({path}:\1)", shown) if path else shown

    # --- functions -------------------------------------------------------------------------------

    def function(self, function: FunctionRef, depth: int) -> Iterator[str]:
        if depth > _MAX_CALL_DEPTH:
            return
        owner = function.frame.self_instance if function.frame is not None else None
        facts = None
        prefix = function.name.rsplit(".", 1)[-1]
        if owner is not None and function.name.startswith(f"{owner.cls}."):
            local = function.name[len(owner.cls) + 1:]
            prefix = f"{owner.short_name}.{local}"
            facts = self.project.class_method(owner.cls, local)
        if facts is not None:
            if self.kind in ("randomness", "unrestored"):
                defined = self.project.class_method_in(owner.cls, local)
                yield from (f"{prefix}: {r}" for r in self._random(facts, owner, defined[0] if defined else owner.cls))
            elif self.kind == "mutations":
                yield from (f"{prefix}: {w}" for w in facts.mutations)
            elif self.kind == "checkpoints":
                yield from (f"{prefix}: {c}" for c in self._checkpoints(facts, owner, function.name))
        evaluated = set(facts.evaluated) if facts is not None else set()
        summary = self.denotation.summary(function.name)
        if summary is None:
            return
        if facts is None and self.kind == "unrestored":
            yield from (f"{prefix}: {r}" for r in self._unrestored(self.project.function_randomness(function.name), function.name))
        if facts is None and self.kind == "randomness":
            # A function outside classes: its random calls (`F.dropout`, `torch.rand`), and its
            # in-place random draws (a hand-written `drop_path`).
            yield from (
                f"{prefix}: {r}" for r in self.project.function_randomness(function.name)
                if not (self.mode_dependent and _draws_in_eval(r)) and not r.startswith(UNRESTORED)
            )
            yield from (
                f"{prefix}: `{callee[2]}` (line {line})" for callee, line in summary.calls
                if callee[0] == "attr" and callee[2] in RANDOM_TENSOR_METHODS
            )
        frame = self.denotation.frame_for(function, summary)
        for callee, line in summary.calls:
            if callee[0] == "attr" and callee[1] == ("name", summary.self_name) and callee[2] in evaluated:
                continue
            label = _label(callee, summary.self_name, owner)
            values = self.denotation.evaluate(callee, replace(frame, before=line + 1))
            for value in sorted(values, key=ordering_key):
                yield from self.callee(value, label, depth + 1)

    def callee(self, value, label: str | None, depth: int) -> Iterator[str]:
        if isinstance(value, Instance):
            yield from (f"{label} -> {p}" if label else p for p in self.instance(value, frozenset()))
        elif isinstance(value, FunctionRef):
            yield from self.function(value, depth)
        elif isinstance(value, Sequence):
            for element in sorted(value.elements, key=ordering_key):
                yield from self.callee(element, label, depth)


def _draws_in_eval(description: str) -> bool:
    """A random operation described as `` `randn_like` (line 4) ``: torch's samplers draw in
    eval mode too (dropout does not)."""
    quoted = description.split("`")
    return len(quoted) > 1 and quoted[1] in _SAMPLERS


def _constructed_at(denotation: Denotation, owner: str | None, paths: list[str] = ()) -> str | None:
    """`Block as constructed at model.py:9`: where the project built the owner of a region
    with the constructor arguments the model resolved (the first call, and how many more);
    where several calls pass different classes, the calls passing one the `paths` name."""
    if owner is None:
        return None
    shown_paths = " ".join(paths)

    def passes_a_class_on_the_path(passed: frozenset) -> bool:
        names = {v.name for v in passed if isinstance(v, ClassRef)} | {v.cls for v in passed if isinstance(v, Instance)}
        return any(name in shown_paths for name in names)

    sites = denotation.passed_through(f"{owner}.__init__", passes_a_class_on_the_path) or denotation.passed_through(
        f"{owner}.__init__"
    )
    # The project's own constructions before its tests'.
    ordered = sorted(sites, key=lambda site: is_test_path(site[1]))
    places = list(dict.fromkeys(f"{path}:{line}" for _, path, line, _ in ordered))
    if not places:
        return None
    more = f" and {len(places) - 1} more" if len(places) > 1 else ""
    return f"{owner.rsplit('.', 1)[-1]} as constructed at {places[0]}{more}"


def _label(expr: tuple, self_name: str | None, owner: Instance | None) -> str | None:
    """How a callee is shown in a path: `Block.attn` for `self.attn`, else its name."""
    if expr[0] == "attr" and expr[1] == ("name", self_name) and owner is not None:
        return f"{owner.short_name}.{expr[2]}"
    if expr[0] == "name":
        return expr[1]
    return None


def shown(paths: list[str], limit: int = 3) -> str:
    return "; ".join(paths[:limit]) + (f"; and {len(paths) - limit} more" if len(paths) > limit else "")
