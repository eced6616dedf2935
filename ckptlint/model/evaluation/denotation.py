"""What an expression denotes: which module classes a value can be, which modules a module
holds, which function runs, followed across constructors, builders, helpers and files.

The evaluator reads the function summaries of `ckptlint.model.file_facts.code` (flow-insensitive: a
name stands for every value bound to it earlier in the function's text) and yields sets of
abstract values:

    ClassRef(name, bound)        a class (or `partial(Class, ...)` of it)
    Instance(cls, arguments)     a module built from a class, with the arguments it was built
                                 with; `members` for torch's containers (Sequential,
                                 ModuleList, ModuleDict), in order
    FunctionRef(name, frame)     a project function or method, with its `self` and closure
    Sequence(items, elements)    a list or tuple (`items` when its length is known)
    Mapping(entries)             a dict with constant keys
    Constant(value)

An empty set means "not known": rules stay silent about what they cannot see. Where the
code chooses among classes by a value not known here (`a if flag else b`), every choice is
kept; a constructor argument the caller passes but that cannot be evaluated is unknown, one
it does not pass (or passes through an opaque `**kwargs`) takes the parameter's default, and
a parameter without a usable default takes the classes its annotation names
(`block: Type[BasicBlock]`). Evaluation is memoised, cycles evaluate to nothing, and every
query has a budget, so no project can make it slow.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from ckptlint.model.project.call_sites import CallSites
from ckptlint.model.evaluation.callers import CallSiteResolution
from ckptlint.model.evaluation.conditions import ConditionSemantics
from ckptlint.model.evaluation.containers import ContainerSemantics
from ckptlint.model.evaluation.invocation import CallSemantics
from ckptlint.model.evaluation.modules import ModuleSemantics
from ckptlint.model.evaluation.registry_semantics import RegistrySemantics
from ckptlint.model.form.summary import ADD, ADD_ELEMENTS, ELEMENTS, ITEM, MODULE_LEVEL, Binding, Expr, FunctionSummary
from ckptlint.model.form.values import (
    ANY_KEY,
    OTHER_KEY,
    NOTHING,
    ClassRef,
    Constant,
    Frame,
    FunctionRef,
    Instance,
    Lambda,
    ModuleRef,
    QUERY_BUDGET,
    OutOfBudget,
    Sequence,
    StoredItem,
    Value,
    destructure,
    falsy,
    names_in,
    truthiness,
)

if TYPE_CHECKING:
    from ckptlint.model.project.project_facts import ProjectFacts

_BUILTINS = frozenset(
    {"dict", "list", "tuple", "set", "zip", "enumerate", "reversed", "sorted", "filter", "iter", "getattr", "chain", "vars"}
)
_MAX_DEPTH = 24
_GENERIC_ANNOTATIONS = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module", "typing.Callable", "collections.abc.Callable"})


class Denotation(
    CallSemantics, ModuleSemantics, ContainerSemantics, CallSiteResolution, ConditionSemantics, RegistrySemantics
):
    """Evaluates expressions of the project's code (one per index; memoised). What module
    instances hold, containers and library calls, parameters resolved at call sites and the
    truth of guarding conditions are the mixins' (`modules.py`, `containers.py`,
    `callers.py`, `conditions.py`)."""

    def __init__(self, index: ProjectFacts, call_sites: CallSites | None = None) -> None:
        self.index = index
        # Where the project calls a function: the index's, shared with its other queries
        # (`ProjectIndex.denotation`); a table of its own for an evaluator built alone.
        self.call_sites = call_sites if call_sites is not None else CallSites(index)
        self._memo: dict = {}
        self._active: set = set()
        self._depth = 0
        self._budget = QUERY_BUDGET
        self._summaries: dict[str, dict[str, FunctionSummary]] = {}
        self._local_bindings: dict[str, dict[str, list[Binding]]] = {}
        self._methods_cache: dict[str, list[FunctionSummary]] = {}
        self._passed: dict[tuple[str, str], frozenset] = {}
        self._passed_at: dict[tuple[str, str], list[tuple[str, int, str]]] = {}
        self._falsy_at: dict[tuple[str, str], list[tuple[str, int]]] = {}  # the calls passing False / None / 0
        self._site_values: dict[tuple[str, str, str, int], frozenset] = {}  # what each of those passed
        self._builder_bindings: dict[str, list] = {}  # what each call of a builder binds (`_builder_calls`)
        self._passed_falsy: dict[tuple[str, str], frozenset] = {}  # False / None the calls pass (`passed_falsy`)
        self._passed_everywhere: dict[tuple[str, str], frozenset | None] = {}  # (`passed_at_every_call`)
        self._everywhere_sites: dict[tuple[str, str], list[tuple[str, int]]] = {}  # its call sites (`every_call_sites`)

    # --- entry points --------------------------------------------------------------------

    def evaluate(self, expr: Expr, frame: Frame) -> frozenset:
        """The values `expr` may denote in `frame` (empty: not known)."""
        self._budget = QUERY_BUDGET
        try:
            return self._eval(expr, frame)
        except OutOfBudget:
            return NOTHING

    def always_holds(self, conditions: tuple, frame: Frame) -> bool:
        """Whether every guarding `if` test is known to have the truth it needs in `frame`
        (`if ac:` with `ac` True wherever it comes from); no conditions always hold."""
        self._budget = QUERY_BUDGET
        try:
            return all(self._truth(test, frame) is wanted for test, wanted in conditions)
        except OutOfBudget:
            return False

    def may_hold(self, conditions: tuple, frame: Frame) -> bool:
        """Whether no guarding `if` test is known to have the other truth in `frame`."""
        self._budget = QUERY_BUDGET
        try:
            return self._may_hold(conditions, frame)
        except OutOfBudget:
            return True

    def passed_at_call(self, function: str, parameter: str, caller: str, line: int) -> tuple[frozenset, bool]:
        """What the call of project function `function` on `line` of `caller` (looked at on
        its own) passes for `parameter`, and whether it passes it; when it does not (or the
        call is not one the summaries keep), the parameter's default."""
        self._budget = QUERY_BUDGET
        try:
            return self._passed_at_call(function, parameter, caller, line)
        except OutOfBudget:
            return NOTHING, False

    def named(self, name: str) -> frozenset:
        """What a variable of the project holds, named by the scope binding it: a function's
        local (`launch.main.TrainerClass`, bound to `getattr(trainers, config.trainer)`) or a
        module's (`launch.TrainerClass`); empty for any other name."""
        scope, _, variable = name.rpartition(".")
        module = scope if scope in self._modules_by_name() else self._module_of(scope)
        function = self.summary(scope) if module is not None and scope != module else None
        if function is None and module is not None:
            function = self._module_summaries(module).get(f"{module}.{MODULE_LEVEL}")
        if function is None or module is None or variable not in self._bindings_of(function):
            return NOTHING
        self._budget = QUERY_BUDGET
        try:
            return frozenset(self._name(variable, self.frame_of(function.name, module)))
        except OutOfBudget:
            return NOTHING

    def frame_of(self, function: str, module: str, self_instance: Instance | None = None) -> Frame:
        """The frame of a project function looked at on its own (nested functions inside
        their parents' frames): parameters nothing else binds are what its call sites pass."""
        parent = None
        owner, _, _ = function.rpartition(".")
        if self.summary(owner) is not None and owner != module:
            parent = self.frame_of(owner, module, self_instance)
        return Frame(function, module, (), self_instance, parent, entry=True)

    def instance(self, class_name: str) -> Instance:
        """An instance of a class looked at on its own: built with its constructor's defaults,
        or with what the project's constructor calls pass where there is no default."""
        found = self.index.class_named(class_name)
        return Instance(found.name if found is not None else class_name, generic=True)

    def attribute(self, instance: Instance, name: str) -> frozenset:
        """The values `instance.<name>` may hold (assigned in any method of its class or its
        bases; registered with `add_module` / `setattr`; else one of its dynamically named
        children)."""
        self._budget = QUERY_BUDGET
        try:
            return self._attribute(instance, name)
        except OutOfBudget:
            return NOTHING

    def children(self, instance: Instance) -> dict[str, frozenset]:
        """Every attribute of a project class's instance that holds a module, with the
        module instances (containers flattened); `*` for children registered under
        computed names."""
        self._budget = QUERY_BUDGET
        try:
            return self._children(instance)
        except OutOfBudget:
            return {}

    def runs(self, values: Iterable[Value]) -> frozenset:
        """What calling these values runs: module instances (their forward), and functions
        with the frames they run in."""
        self._budget = QUERY_BUDGET
        try:
            return frozenset(value for value in self._runs(values))
        except OutOfBudget:
            return NOTHING

    def callees(self, function: FunctionRef) -> frozenset:
        """What a function's body calls that the model can follow."""
        self._budget = QUERY_BUDGET
        summary = self.summary(function.name)
        if summary is None:
            return NOTHING
        frame = self.frame_for(function, summary)
        found: set = set()
        try:
            for callee, line in summary.calls:
                found |= self._eval(callee, replace(frame, before=line + 1))
        except OutOfBudget:
            pass
        return frozenset(found)

    # --- summaries ------------------------------------------------------------------------

    def summary(self, name: str) -> FunctionSummary | None:
        module = self._module_of(name)
        if module is None:
            return None
        return self.index.summary_in_file(self._modules_by_name().get(module), name)

    def _module_summaries(self, module: str) -> dict[str, FunctionSummary]:
        found = self._summaries.get(module)
        if found is None:
            path = self._modules_by_name().get(module)
            facts = self.index.files.get(path) if path is not None else None
            found = {s.name: s for s in facts.summaries} if facts is not None else {}
            self._summaries[module] = found
        return found

    def _modules_by_name(self) -> dict[str, str]:
        return self.index.module_paths

    def _module_of(self, name: str) -> str | None:
        modules = self._modules_by_name()
        parts = name.split(".")
        for end in range(len(parts) - 1, 0, -1):
            candidate = ".".join(parts[:end])
            if candidate in modules:
                return candidate
        return None

    def _names(self, module: str) -> dict[str, str]:
        path = self._modules_by_name().get(module)
        facts = self.index.files.get(path) if path is not None else None
        return dict(facts.names) if facts is not None else {}

    def star_imports(self, module: str) -> tuple[str, ...]:
        """The project modules `module` imports every public name of (`from ._blocks import *`)."""
        path = self._modules_by_name().get(module)
        facts = self.index.files.get(path) if path is not None else None
        return tuple(m for m in facts.star_imports if m in self._modules_by_name()) if facts is not None else ()

    def _star_imported(self, module: str, name: str) -> str | None:
        """What `name` is in `module` through its star imports (theirs too): the absolute name."""
        return self.index.star_imported(module, name)

    def _bindings_of(self, summary: FunctionSummary) -> dict[str, list[Binding]]:
        """The bindings of a function by the local name they bind."""
        found = self._local_bindings.get(summary.name)
        if found is None:
            found = {}
            for binding in summary.bindings:
                for name in names_in(binding.pattern):
                    found.setdefault(name, []).append(binding)
            self._local_bindings[summary.name] = found
        return found

    # --- evaluation ------------------------------------------------------------------------

    def _eval(self, expr: Expr, frame: Frame) -> frozenset:
        # `("const", 1) == ("const", True)`: a constant's key carries its type.
        key = (expr, frame) if expr[0] != "const" else (expr, type(expr[1]), frame)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if key in self._active or self._depth > _MAX_DEPTH:
            return NOTHING
        self._budget -= 1
        if self._budget < 0:
            raise OutOfBudget
        self._active.add(key)
        self._depth += 1
        try:
            result = frozenset(self._evaluate(expr, frame))
        finally:
            self._depth -= 1
            self._active.discard(key)
        self._memo[key] = result
        return result

    def _evaluate(self, expr: Expr, frame: Frame) -> Iterable[Value]:
        tag = expr[0]
        if tag == "name":
            return self._name(expr[1], frame)
        if tag == "attr":
            dotted = self._global_dotted(expr, frame)
            if dotted is not None:
                return self._absolute(dotted)
            found: set = set()
            for value in self._eval(expr[1], frame):
                found |= self._attribute_of(value, expr[2])
            return found
        if tag == "call":
            return self._call(expr, frame)
        if tag == "index":
            registry = self._registry(expr[1], frame)
            keys = self._eval(expr[2], frame) if expr[2] is not None else NOTHING
            if registry is not None:  # `BACKBONES[cfg["type"]]`: the registered classes, else what it is bound to
                registered = self._registered(registry, keys)
                if registered or not all(isinstance(k, Constant) for k in keys) or not keys:
                    return registered
            values = self._eval(expr[1], frame)
            if not keys:
                return self._index(values, ANY_KEY)
            # `norms[name]`, `name` one of known literals; a key that is no literal (a tuple
            # built at run time, a module) is not one a literal-keyed mapping holds.
            return set().union(*(self._index(values, k.value if isinstance(k, Constant) else OTHER_KEY) for k in keys))
        if tag == "seq":
            return {self._sequence(expr[1], frame)}
        if tag == "dict":
            return {self._mapping(expr[1], frame)}
        if tag == "or":
            found = set()
            for part in expr[1]:
                values = self._eval(part, frame)
                found |= {v for v in values if not falsy(v)}
                if values and not any(falsy(v) for v in values):
                    break  # `a or b` with `a` always set: never `b`
            return found
        if tag == "if":
            # `DropPath(rate) if rate > 0.0 else nn.Identity()`: the branch the test picks
            truth = self._truth(expr[1], frame)
            if truth is not None:
                return self._eval(expr[2] if truth else expr[3], frame)
            return self._eval(expr[2], frame) | self._eval(expr[3], frame)
        if tag == "const":
            return {Constant(expr[1])}
        if tag == ITEM:  # what `d["key"] = expr` stores (`_bound_by` keeps the key)
            return self._eval(expr[2], frame)
        if tag == "not":
            # `not USE_REENTRANT`: the negated truth of each value, when every one's is known
            truths = [truthiness(value) for value in self._eval(expr[1], frame)]
            return set() if None in truths else {Constant(not truth) for truth in truths}
        if tag == "comp":
            return {Sequence(None, frozenset(self._comprehension(expr[1], expr[2], frame)))}
        if tag == "lambda":
            return {Lambda(expr[1], frame)}
        return ()

    def _name(self, name: str, frame: Frame) -> Iterable[Value]:
        for local, values in frame.locals:
            if local == name:
                return values
        summary = self.summary(frame.function) if frame.function is not None else None
        if summary is None:
            return self._global(name, frame.module, frame.before)
        if name == summary.self_name and frame.self_instance is not None:
            return {frame.self_instance}
        parameter = next((p for p in summary.parameters if p.name == name), None)
        found: set = set()
        if parameter is not None:
            bound = next((values for key, values in frame.arguments if key == name), None)
            if bound is not None:
                # Passed but not known: what the annotation says it is.
                found |= bound if bound else self._annotated(parameter)
            elif parameter.kind not in ("*", "**"):
                found |= self._default(parameter, frame, annotated=not frame.entry)
                if frame.entry and any(not falsy(v) for v in found):
                    # Beside a truthy default, the literals the project passes (`Net("bn")`
                    # where the default is "gn", `Encoder(use_reentrant=False)`). Not what
                    # else it passes: a class picked by a key the model cannot tell is every
                    # class of the table, next to a default that names one (timm's
                    # `norm_layer=LayerNorm`).
                    found |= {v for v in self._passed_by_callers(summary, name) if isinstance(v, Constant)}
                    found |= self.passed_falsy(summary, name)
                elif frame.entry and _flag_default(parameter) and (everywhere := self.passed_at_every_call(summary, name)):
                    # Every call passes a flag (`Net(reentrant=True)`): the default never runs.
                    found = set(everywhere)
                elif frame.entry:
                    # What the project passes, before what the annotation names (`cfg:
                    # Config` built as `Encoder(Config(norm="bn"))`).
                    found |= self._passed_by_callers(summary, name)
                    if not any(not falsy(v) for v in found):
                        found |= self._annotated(parameter)
        bindings = self._bindings_of(summary).get(name)
        if bindings:
            for binding in _visible(bindings, frame.before):
                found |= self._bound_by(binding, name, frame)
            if any(binding.how in (ADD, ADD_ELEMENTS) for binding in bindings):
                found = self._with_added_members(found)
        if parameter is not None or bindings:
            return found
        if name in summary.nested:
            if summary.name.endswith(_MODULE_LEVEL):  # a module's own function, not a closure
                return {FunctionRef(f"{summary.name.removesuffix(_MODULE_LEVEL)}.{name}")}
            return {FunctionRef(f"{summary.name}.{name}", frame)}
        if frame.parent is not None:
            return self._name(name, frame.parent)
        return self._global(name, frame.module, None)

    def _default(self, parameter, frame: Frame, *, annotated: bool = True) -> set:
        """A parameter nothing was passed for: its default, else (or when the default is
        None, and `annotated`) the classes its annotation names."""
        found: set = set()
        if parameter.default is not None:
            found |= self._eval(parameter.default, Frame(None, frame.module))
        if annotated and not any(not falsy(v) for v in found):
            found |= self._annotated(parameter)
        return found

    def _annotated(self, parameter) -> set:
        """The classes a parameter's annotation names, as the classes themselves and as a
        collection of them (`Tuple[Type[A], ...]` is iterated, `Type[A]` is called)."""
        classes: set = set()
        for name in parameter.annotated:
            if name not in _GENERIC_ANNOTATIONS:
                classes |= {v for v in self._absolute(name) if isinstance(v, ClassRef)}
        return classes | {Sequence(None, frozenset(classes))} if classes else set()

    def _bound_by(self, binding: Binding, name: str, frame: Frame) -> set:
        """What `binding` binds `name` to (a binding's own value sees only earlier lines)."""
        own = replace(frame, before=binding.line)
        if not self._may_hold(binding.conditions, own):
            return set()
        values = self._eval(binding.value, own)
        if binding.how == ELEMENTS:
            values = self._elements(values)
        if binding.how in (ADD, ADD_ELEMENTS):
            if binding.pattern != ("name", name):
                return set()
            added = values if binding.how == ADD else self._elements(values)
            if binding.value[0] == ITEM:
                return {StoredItem(binding.value[1], frozenset(added))}
            return {Sequence(None, frozenset(added))}
        return set(destructure(values, binding.pattern, name, self._elements))

    def _global(self, name: str, module: str, before: int | None) -> Iterable[Value]:
        absolute = self._names(module).get(name) or self._star_imported(module, name)
        if absolute is not None:
            return self._absolute(absolute)
        if name in _BUILTINS:
            return {FunctionRef(f"builtins.{name}")}
        return ()

    def _global_dotted(self, expr: Expr, frame: Frame) -> str | None:
        """`nn.BatchNorm2d`, `layers.Block`: an attribute chain on an imported or top-level
        name, as one absolute name."""
        parts: list[str] = []
        while expr[0] == "attr":
            parts.append(expr[2])
            expr = expr[1]
        if expr[0] != "name" or self._is_local(expr[1], frame):
            return None
        absolute = self._names(frame.module).get(expr[1])
        if absolute is None:
            return None
        return ".".join([absolute, *reversed(parts)])

    def _is_local(self, name: str, frame: Frame | None) -> bool:
        while frame is not None:
            if any(local == name for local, _ in frame.locals) or any(bound == name for bound, _ in frame.arguments):
                return True
            summary = self.summary(frame.function) if frame.function is not None else None
            if summary is not None and (
                name == summary.self_name
                or name in summary.nested
                or any(p.name == name for p in summary.parameters)
                or name in self._bindings_of(summary)
            ):
                return True
            frame = frame.parent
        return False

    def _absolute(self, name: str, hops: int = 0) -> Iterable[Value]:
        """A name as imported: a class or function of the project (in any file), a
        module-level variable of the project, or a library name."""
        found = self.index.class_named(name)
        if found is not None:
            return {ClassRef(found.name)}
        if self.summary(name) is not None:
            return {FunctionRef(name)}
        if name in self._modules_by_name():
            return {ModuleRef(name)}
        module, _, variable = name.rpartition(".")
        if variable == "__dict__" and module in self._modules_by_name():
            return self._attribute_of(ModuleRef(module), variable)  # `models.__dict__[args.arch]`
        if module in self._modules_by_name():
            summary = self._module_summaries(module).get(f"{module}.{MODULE_LEVEL}")
            if summary is not None and variable in self._bindings_of(summary):
                return self._name(variable, Frame(summary.name, module))
            # A package's `__init__` re-exporting a helper of a submodule
            # (`from .blocks import make_stage`): where it imports it from.
            imported = self._names(module).get(variable) or self._star_imported(module, variable)
            if imported is not None and imported != name and hops < 4:
                return self._absolute(imported, hops + 1)
            return ()
        owner = self.index.class_named(module)
        if owner is not None:  # `Config.norm`: a class attribute of a project class
            return self._class_attribute(owner.name, variable)
        if self._module_of(name) is not None:
            return ()  # a project module's name that the index does not know
        short = name.rsplit(".", 1)[-1]
        return {ClassRef(name)} if short[:1].isupper() else {FunctionRef(name)}

    # --- what a region runs ----------------------------------------------------------------------

    def _runs(self, values: Iterable[Value], depth: int = 0) -> Iterator[Value]:
        for value in values:
            if isinstance(value, (Instance, FunctionRef, Lambda)):
                yield value
            elif isinstance(value, Sequence) and depth < 4:
                yield from self._runs(value.elements, depth + 1)

    def frame_for(self, function: FunctionRef, summary: FunctionSummary) -> Frame:
        """The frame a function runs in: its own closure frame, or a new one."""
        if function.frame is not None and function.frame.function == summary.name:
            return function.frame
        module = self._module_of(summary.name) or ""
        self_instance = function.frame.self_instance if function.frame is not None else None
        return Frame(summary.name, module, function.bound, self_instance, function.frame)


_MODULE_LEVEL = ".<module>"  # the summary of a module's top-level code (`ckptlint.model.file_facts.extraction`)


def _flag_default(parameter) -> bool:
    """A parameter whose default is False (or None): a flag the calls may all turn on."""
    return parameter.default in (("const", False), ("const", None))


def _visible(bindings: list[Binding], before: int | None) -> list[Binding]:
    """The bindings a use on line `before` may see: those on earlier lines; inside a `for`
    loop over the name, only the loop's own binding and what follows it."""
    if before is None:
        return bindings
    earlier = [b for b in bindings if b.line < before]
    loops = [b for b in earlier if b.how == ELEMENTS and before - 1 <= b.end]
    if loops:
        start = max(b.line for b in loops)
        return [b for b in earlier if b.line >= start]
    return earlier
