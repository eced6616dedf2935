"""Where the project calls a function: the call sites a generic parameter is resolved at.

`def apply_checkpointing(model): ...` says nothing about `model`; the calls
`apply_checkpointing(ResNet())` in the project's other files do. The call sites are the
`passes` of the function summaries (calls of a global function or of a method of `self`
that pass it a name or an attribute) in the files that can name the function: its own
module, and every file whose imports name it, its class or its module (written in full or as
a script imports it, `from helpers import f` for `scripts/helpers.py`). Which call really
calls it is for the evaluator to decide; this only narrows where to look, without reading
the summaries of files that cannot call it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING

from ckptlint.model.library import LIGHTNING_FABRIC_SETUP_METHODS, LIGHTNING_MODEL_PARALLEL, LIGHTNING_PARALLELIZE_KEYWORD
from ckptlint.model.names import is_test_path
from ckptlint.model.summary import Expr, FunctionSummary, dotted_absolute
from ckptlint.model.values import (
    NOTHING, QUERY_BUDGET, Arguments, ClassRef, Constant, Frame, FunctionRef, Instance, OutOfBudget, falsy,
)

if TYPE_CHECKING:
    from ckptlint.model.index import ProjectIndex


class CallSites:
    def __init__(self, index: ProjectIndex) -> None:
        self.index = index
        self._namers: dict[str, list[str]] | None = None
        self._aliases: dict[str, list[str]] | None = None
        self._value_names_by_path: dict[str, frozenset[str]] = {}

    def of(self, function: str, module: str) -> Iterator[tuple[str, FunctionSummary, Expr, int]]:
        """(path, calling function, call, line) for every call whose callee's last name is
        `function`'s, in the files that can name it."""
        owner, _, short = function.rpartition(".")
        constructor = short == "__init__"
        if constructor:  # a constructor is called by its class's name
            short = owner.rsplit(".", 1)[-1]
        paths = self.candidates(function, module)
        if constructor:
            paths = sorted({*paths, *self._builders_handed(short, paths)})
        for path in paths:
            facts = self.index.files.get(path)
            for caller in facts.summaries if facts is not None else ():
                parameters = {p.name for p in caller.parameters} if constructor else set()
                for call, line in caller.passes:
                    callee = call[1]
                    # Also a class handed to a builder and called there by its parameter's
                    # name (`block(...)` in `make_res_layer(block, ...)`).
                    if _last_name(callee) == short or (callee[0] == "name" and callee[1] in parameters):
                        yield path, caller, call, line

    def applications(self, function: str, module: str) -> Iterator[tuple[str, FunctionSummary, Expr, int]]:
        """(path, calling function, call, line) for every `<module>.apply(function)` (torch
        runs `function` on each module below), in the files that can name it."""
        short = function.rsplit(".", 1)[-1]
        for path in self.candidates(function, module):
            facts = self.index.files.get(path)
            for caller in facts.summaries if facts is not None else ():
                for call, line in caller.passes:
                    callee, arguments = call[1], call[2]
                    if callee[0] == "attr" and callee[2] == "apply" and len(arguments) == 1 and _last_name(arguments[0]) == short:
                        yield path, caller, call, line

    def parallelized(self, function: str, module: str) -> Iterator[tuple[str, FunctionSummary, Expr, int]]:
        """For a function the project hands to Lightning's `ModelParallelStrategy(parallelize_fn=...)`:
        (path, calling function, module expression, line) for every `<fabric>.setup(module, ...)`
        and `.setup_module(module)` in the files that hand it over (a script builds its Fabric
        and sets its model up together), each of which runs it on that module (`.setup` only
        on a receiver named `fabric`: the name is too common otherwise)."""
        # The Fabric the strategy is given sets its modules up in the same file (the script).
        for path in self._parallelize_functions.get(function.rsplit(".", 1)[-1], ()):
            facts = self.index.files.get(path)
            for caller in facts.summaries if facts is not None else ():
                # `model = fabric.setup_module(model)`: a method of a parameter is kept among
                # the bindings' values, not among the calls that pass something.
                bound = [(b.value, b.line) for b in caller.bindings if b.value[0] == "call"]
                for call, line in sorted({*caller.passes, *bound}, key=lambda c: (c[1], repr(c[0]))):
                    callee, arguments = call[1], call[2]
                    if callee[0] != "attr" or callee[2] not in LIGHTNING_FABRIC_SETUP_METHODS or not arguments:
                        continue
                    receiver = _last_name(callee[1]) or ""
                    if (callee[2] == "setup_module" or "fabric" in receiver.lower()) and arguments[0][0] != "star":
                        yield path, caller, arguments[0], line

    @cached_property
    def _parallelize_functions(self) -> dict[str, list[str]]:
        """The last name of each function handed to Lightning's `ModelParallelStrategy` (by
        keyword or first), and the files that hand it over: one look for the whole project."""
        found: dict[str, set[str]] = {}
        for strategy in sorted(LIGHTNING_MODEL_PARALLEL):
            for path, _, call, _ in self.library_calls(strategy):
                handed = [value for name, value in call[3] if name == LIGHTNING_PARALLELIZE_KEYWORD] + list(call[2][:1])
                for value in handed:
                    short = _last_name(value)
                    if short is not None:
                        found.setdefault(short, set()).add(path)
        return {short: sorted(paths) for short, paths in found.items()}

    def library_calls(self, function: str) -> Iterator[tuple[str, FunctionSummary, Expr, int]]:
        """(path, calling function, call, line) for every call passing something to a library
        `function` (absolute), as the calling file's imports name it."""
        module = function.rsplit(".", 1)[0]
        for path in self.candidates(function, module):
            facts = self.index.files.get(path)
            if facts is None:
                continue
            names = dict(facts.names)
            for caller in facts.summaries:
                for call, line in caller.passes:
                    if dotted_absolute(call[1], names) == function:
                        yield path, caller, call, line

    def calls_of(self, function: str, module: str) -> Iterator[tuple[str, FunctionSummary, Expr, int]]:
        """(path, calling function, callee, line) for every call (passing anything or nothing)
        whose callee's last name is `function`'s, in the files that can name it."""
        owner, _, short = function.rpartition(".")
        if short == "__init__":
            short = owner.rsplit(".", 1)[-1]
        for path in self.candidates(function, module):
            facts = self.index.files.get(path)
            for caller in facts.summaries if facts is not None else ():
                for callee, line in caller.calls:
                    if _last_name(callee) == short:
                        yield path, caller, callee, line

    def named_as_value(self, function: str, module: str) -> bool:
        """Whether a file that can name `function` (or its class) holds it other than as a
        callee: put in a table, handed to a builder, bound to another name; then calls of
        it may be made where no summary shows them."""
        owner, _, short = function.rpartition(".")
        if short == "__init__":
            short = owner.rsplit(".", 1)[-1]
        return any(short in self._value_names(path) for path in self.candidates(function, module))

    def _value_names(self, path: str) -> frozenset[str]:
        """The global names a file's summaries hold other than as what a call calls (each
        file walked once: `named_as_value` asks about one name after another)."""
        found = self._value_names_by_path.get(path)
        if found is None:
            names: set[str] = set()
            facts = self.index.files.get(path)
            for summary in facts.summaries if facts is not None else ():
                for expr in (*(b.value for b in summary.bindings), *(r for r, _ in summary.returns), *(c for c, _ in summary.passes)):
                    _collect_value_names(expr, names)
            found = self._value_names_by_path[path] = frozenset(names)
        return found

    def _builders_handed(self, class_name: str, paths: list[str]) -> set[str]:
        """The files of the project functions that `paths` hand the class to by name
        (`make_layer(GroupBlock, ...)` with `make_layer` imported from `blocks`): a builder
        there may call it through its parameter."""
        found: set[str] = set()
        for path in paths:
            facts = self.index.files.get(path)
            if facts is None:
                continue
            names = dict(facts.names)
            for caller in facts.summaries:
                for call, _ in caller.passes:
                    if call[1][0] != "name" or not any(_last_name(a) == class_name for a in call[2]):
                        continue
                    where = self._defined_in(names.get(call[1][1], ""))
                    if where is not None:
                        found.add(where)
        return found

    def _defined_in(self, absolute: str) -> str | None:
        """The file a project function is defined in, through the packages re-exporting it
        (`backbone.layers.make_layer` imported in `backbone/layers/__init__.py` from `.blocks`)."""
        for _ in range(4):
            path = self.index.path_of(absolute) if absolute else None
            facts = self.index.files.get(path) if path is not None else None
            if facts is None:
                return None
            local = absolute[len(facts.module) + 1:] if absolute.startswith(f"{facts.module}.") else ""
            imported = dict(facts.names).get(local.split(".", 1)[0]) if local else None
            if imported is None or imported == absolute or "." in local:
                return path
            absolute = imported
        return None

    def candidates(self, function: str, module: str) -> list[str]:
        own = self.index.module_paths.get(module)
        found = {own} if own is not None else set()
        namers = self._names_table()
        for name in self._spellings(function, module):
            parts = name.split(".")
            for end in range(len(module.split(".")), len(parts) + 1):
                for start in range(end):
                    found.update(namers.get(".".join(parts[start:end]), ()))
        return sorted(found)

    def _spellings(self, function: str, module: str) -> list[str]:
        """`function` and the names packages re-export it (or its class) under:
        `backbone.layers.make_layer` for `backbone.layers.blocks.make_layer`."""
        spellings = [function]
        aliases = self._aliases_table()
        parts = function.split(".")
        for end in range(len(module.split(".")) + 1, len(parts) + 1):
            head, rest = ".".join(parts[:end]), parts[end:]
            spellings.extend(".".join([alias, *rest]) for alias in aliases.get(head, ()))
        return spellings

    def _aliases_table(self) -> dict[str, list[str]]:
        """An absolute name -> the names package `__init__` files re-export it under (two
        levels of re-export followed)."""
        if self._aliases is None:
            table: dict[str, list[str]] = {}
            for path, facts in self.index.files.items():
                if path.endswith("__init__.py"):
                    for local, absolute in facts.names:
                        alias = f"{facts.module}.{local}"
                        if absolute != alias:
                            table.setdefault(absolute, []).append(alias)
            for absolute, aliases in list(table.items()):
                for alias in list(aliases):
                    aliases.extend(a for a in table.get(alias, ()) if a not in aliases)
            self._aliases = table
        return self._aliases

    def _names_table(self) -> dict[str, list[str]]:
        """Every absolute name some file's imports or definitions refer to -> those files."""
        if self._namers is None:
            table: dict[str, list[str]] = {}
            for path, facts in self.index.files.items():
                for _, absolute in facts.names:
                    table.setdefault(absolute, []).append(path)
            self._namers = table
        return self._namers


class CallSiteResolution:
    """A mixin of `ckptlint.model.denotation.Denotation`: parameters resolved at call sites."""

    def passed_through(self, function: str, holds=None) -> tuple[tuple[str, str, int, str], ...]:
        """The call sites (parameter, path, line, calling function) whose arguments stood for
        a parameter of `function` (or of a function it is nested in) in the evaluations so far;
        with `holds`, only those whose passed values it accepts."""
        return tuple(
            (parameter, path, line, caller)
            for (name, parameter), sites in sorted(self._passed_at.items())
            if function == name or function.startswith(f"{name}.")
            for path, line, caller in sites
            if holds is None or holds(self._site_values.get((name, parameter, path, line), NOTHING))
        )

    def passed_by_the_project(self, summary: FunctionSummary, parameter: str) -> frozenset:
        """Everything the project's own call sites (not its tests') pass for a parameter,
        False and None included (`Backbone(norm_eval=False)`)."""
        module = self._module_of(summary.name)
        if module is None:
            return NOTHING
        values: set = set()
        try:
            for path, caller, call, line in self._call_sites.of(summary.name, module):
                if is_test_path(path):
                    continue
                values |= self._argument_at(summary, parameter, call, replace(self._entry_frame(caller.name), before=line + 1))
        except OutOfBudget:
            pass
        return frozenset(values)

    def evaluate_in_call(self, function: str, expr: Expr, line: int, site: tuple[str, int] | None) -> frozenset:
        """What `expr` denotes on `line` of project function `function` as the call of it on
        `site` (calling function, line) runs it: parameters bound to what that call passes,
        the rest to their defaults; with no site, the function looked at on its own."""
        self._budget = QUERY_BUDGET
        try:
            module = self._module_of(function) or ""
            frame = self.frame_of(function, module) if site is None else self._call_frame(function, *site)
            return self._eval(expr, replace(frame, before=line + 1)) if frame is not None else NOTHING
        except OutOfBudget:
            return NOTHING

    def _call_frame(self, function: str, caller: str, line: int) -> Frame | None:
        summary, calling = self.summary(function), self.summary(caller)
        if summary is None or calling is None:
            return None
        short = function.rsplit(".", 1)[-1]
        calls = [call for call, at in calling.passes if at == line and _last_name(call[1]) == short]
        if len(calls) != 1:
            return None
        frame = replace(self._entry_frame(caller), before=line + 1)
        positional, named, opaque = self._arguments(calls[0], frame)
        arguments = self._match(summary, positional, named, opaque, skip_self=summary.self_name is not None)
        return Frame(function, self._module_of(function) or "", arguments)

    def _passed_at_call(self, function: str, parameter: str, caller: str, line: int) -> tuple[frozenset, bool]:
        summary, calling = self.summary(function), self.summary(caller)
        if summary is None or calling is None:
            return NOTHING, False
        short = function.rsplit(".", 1)[-1]
        for call, at in calling.passes:
            if at != line or _last_name(call[1]) != short or not (call[2] or call[3]):
                continue  # (a call kept without its arguments passes nothing the model follows)
            frame = replace(self._entry_frame(caller), before=line + 1)
            positional, named, opaque = self._arguments(call, frame)
            matched = self._match(summary, positional, named, opaque, skip_self=summary.self_name is not None)
            passed = next((values for name, values in matched if name == parameter), None)
            if passed is not None:
                return passed, True
            break
        declared = next((p for p in summary.parameters if p.name == parameter), None)
        if declared is None:
            return NOTHING, False
        module = self._module_of(function) or ""
        return frozenset(self._default(declared, Frame(function, module), annotated=False)), False

    def _passed_by_callers(self, summary: FunctionSummary, parameter: str) -> frozenset:
        """What the project's call sites of a module-level function or a method pass for one
        of its parameters, each call evaluated in its own function (looked at on its own:
        a caller's generic parameter is resolved at its callers in turn)."""
        key = (summary.name, parameter)
        found = self._passed.get(key)
        if found is not None:
            return found
        module = self._module_of(summary.name)
        if key in self._active or module is None:
            return NOTHING
        self._active.add(key)
        values: set = set()
        falsy_values: set = set()
        sites: list[tuple[str, int, str]] = []
        falsy_sites: list[tuple[str, int]] = []
        try:
            for path, caller, call, line in self._call_sites.of(summary.name, module):
                passed = self._argument_at(summary, parameter, call, replace(self._entry_frame(caller.name), before=line + 1))
                if any(not falsy(v) for v in passed):
                    values |= passed
                    sites.append((path, line, caller.name))
                    self._site_values[(summary.name, parameter, path, line)] = frozenset(passed)
                else:
                    falsy_values |= passed
                    if passed:
                        falsy_sites.append((path, line))
            if summary.parameters and parameter == summary.parameters[0].name and summary.self_name is None:
                # A `parallelize_fn` Lightning's Fabric runs on each module it sets up.
                for path, caller, expr, line in self._call_sites.parallelized(summary.name, module):
                    passed = self._eval(expr, replace(self._entry_frame(caller.name), before=line + 1))
                    if any(not falsy(v) for v in passed):
                        values |= passed
                        sites.append((path, line, caller.name))
                        self._site_values[(summary.name, parameter, path, line)] = frozenset(passed)
        finally:
            self._active.discard(key)
        self._passed_falsy[key] = frozenset(falsy_values)
        self._falsy_at[key] = falsy_sites
        found = self._passed[key] = frozenset(values)
        # A message names the first: the project's own call sites before its tests'.
        self._passed_at[key] = sorted(sites, key=lambda site: is_test_path(site[0]))
        return found

    def falsy_passed_at(self, function: str, parameter: str) -> tuple[tuple[str, int], ...]:
        """The call sites that pass False / None / 0 for a parameter (path, line), as the
        evaluations so far found them."""
        return tuple(self._falsy_at.get((function, parameter), ()))

    def default_runs_at(self, function: str, parameter: str) -> tuple[tuple[str, int], ...]:
        """The call sites (path, line) of a function that leave `parameter` out, so that its
        default runs there: no keyword of that name, too few positional arguments, no `*` /
        `**` splat (a call passing only constants, which the summaries keep without its
        arguments, is not known to)."""
        summary = self.summary(function)
        module = self._module_of(function)
        if summary is None or module is None:
            return ()
        positional = [p.name for p in summary.parameters if p.kind == "positional"]
        if positional and positional[0] in (summary.self_name, "cls"):
            positional = positional[1:]
        if parameter not in positional and not any(p.name == parameter for p in summary.parameters):
            return ()
        sites = []
        try:
            for path, caller, callee, line in self._call_sites.calls_of(function, module):
                frame = replace(self._entry_frame(caller.name), before=line + 1)
                if not self._calls_function(callee, summary, frame):
                    continue
                for call, at in caller.passes:
                    if at != line or call[1] != callee or not (call[2] or call[3]):
                        continue
                    arguments, keywords = call[2], call[3]
                    if any(a[0] == "star" for a in arguments) or any(k is None or k == parameter for k, _ in keywords):
                        continue
                    if parameter in positional and len(arguments) > positional.index(parameter):
                        continue
                    sites.append((path, line))
        except OutOfBudget:
            return ()
        return tuple(sorted(set(sites)))

    def passed_at_every_call(self, summary: FunctionSummary, parameter: str) -> frozenset | None:
        """The constants the project's calls of a function pass for `parameter` when every
        call passes one (`Net(reentrant=True)` wherever a `Net` is built: its default never
        runs); None when a call leaves it out or passes something else, when there is no
        call, or when the function (its class) is also held as a value (a table, a builder's
        argument) and may be called where no summary shows it."""
        key = (summary.name, parameter)
        if key in self._passed_everywhere:
            return self._passed_everywhere[key]
        module = self._module_of(summary.name)
        active = ("every call", key)
        if module is None or active in self._active:
            return None
        self._active.add(active)
        try:
            found = None
            if not self._call_sites.named_as_value(summary.name, module):
                found = self._constants_at_every_call(summary, parameter, module)
        finally:
            self._active.discard(active)
        self._passed_everywhere[key] = found
        return found

    def every_call_sites(self, function: str) -> list[tuple[str, str, int]]:
        """(parameter, path, line) of the calls found passing a constant for a parameter of
        `function` wherever it is called, in the evaluations so far (for a message)."""
        return sorted(
            (parameter, path, line)
            for (name, parameter), sites in self._everywhere_sites.items() if name == function
            for path, line in sites
        )

    def _constants_at_every_call(self, summary: FunctionSummary, parameter: str, module: str) -> frozenset | None:
        values: set = set()
        sites: list[tuple[str, int]] = []
        called = False
        for path, caller, callee, line in self._call_sites.calls_of(summary.name, module):
            frame = replace(self._entry_frame(caller.name), before=line + 1)
            if not self._calls_function(callee, summary, frame):
                continue
            called = True
            # A call passing only what the summaries leave out (nothing, a positional flag)
            # has no `passes` entry: the default may run there.
            calls = [call for call, at in caller.passes if at == line and call[1] == callee]
            if not calls:
                return None
            for call in calls:
                passed = self._argument_at(summary, parameter, call, frame)
                # Flags only: a partly known value (a name rebound in a loop whose other
                # bindings the model cannot evaluate) would stand for all of it, and a default
                # class or size would be dropped for it (timm's CPUBone lost its BatchNorm).
                if not passed or not all(isinstance(v, Constant) and isinstance(v.value, bool) for v in passed):
                    return None
                values |= passed
                sites.append((path, line))
        if not called:
            return None
        self._everywhere_sites[(summary.name, parameter)] = sites
        return frozenset(values)

    def calls_without_reentrant(self, function: str) -> list[tuple[str, int]] | None:
        """For a project function that hands its `**kwargs` to torch's checkpoint: its calls
        (path, line) when there is one and none passes `use_reentrant` or splats `**` (the
        checkpoint then runs with torch's default); None when one does, when a call's
        arguments are not in the summaries, or when the function is also held as a value
        (it may be called where no summary shows it)."""
        summary = self.summary(function)
        module = self._module_of(function)
        if summary is None or module is None or self._call_sites.named_as_value(function, module):
            return None
        sites: list[tuple[str, int]] = []
        for path, caller, callee, line in self._call_sites.calls_of(function, module):
            frame = replace(self._entry_frame(caller.name), before=line + 1)
            if not self._calls_function(callee, summary, frame):
                continue
            calls = [call for call, at in caller.passes if at == line and call[1] == callee]
            if not calls:
                return None
            # A call kept without its arguments passed only constants that are not flags.
            if any(name is None or name == "use_reentrant" for call in calls for name, _ in call[3]):
                return None
            sites.append((path, line))
        return sorted(set(sites)) or None

    def _calls_function(self, callee: Expr, summary: FunctionSummary, frame: Frame) -> bool:
        """Whether `callee`, in `frame`, is the function (or the class whose constructor) `summary` is."""
        if callee[0] == "attr" and self._global_dotted(callee, frame) is None:
            receivers = [r for r in self._eval(callee[1], frame) if isinstance(r, Instance)]
            return any(getattr(self._method(r.cls, callee[2]), "name", None) == summary.name for r in receivers)
        return any(
            (isinstance(v, ClassRef) and f"{v.name}.__init__" == summary.name) or (isinstance(v, FunctionRef) and v.name == summary.name)
            for v in self._eval(callee, frame)
        )

    def passed_falsy(self, summary: FunctionSummary, parameter: str) -> frozenset:
        """The False / None / 0 the project's calls pass for a parameter (after
        `_passed_by_callers`, which computes them): a value beside a truthy default
        (`Encoder(use_reentrant=False)` where the default is True)."""
        return self._passed_falsy.get((summary.name, parameter), NOTHING)

    def _argument_at(self, summary: FunctionSummary, parameter: str, call: Expr, frame: Frame) -> set:
        """What `call`, in `frame`, passes for `parameter` when it calls `summary`'s function."""
        func = call[1]
        if func[0] == "name" and frame.entry:
            through = self._through_parameter(summary, parameter, call, frame)
            if through is not None:
                return through
        matched: list[Arguments] = []
        if func[0] == "attr" and self._global_dotted(func, frame) is None:
            receivers = [r for r in self._eval(func[1], frame) if isinstance(r, Instance)]
            if any(getattr(self._method(r.cls, func[2]), "name", None) == summary.name for r in receivers):
                positional, named, opaque = self._arguments(call, frame)
                matched.append(self._match(summary, positional, named, opaque, skip_self=True))
        else:
            for callee in self._eval(func, frame):
                if isinstance(callee, ClassRef) and f"{callee.name}.__init__" == summary.name:
                    positional, named, opaque = self._arguments(call, frame)
                    named = {**dict(callee.bound), **named}
                    matched.append(self._match(summary, positional, named, opaque, skip_self=True))
                elif isinstance(callee, FunctionRef) and callee.name == summary.name:
                    positional, named, opaque = self._arguments(call, frame)
                    bound = callee.frame is not None and callee.frame.self_instance is not None
                    matched.append(self._match(
                        summary, [*callee.positional, *positional], {**dict(callee.bound), **named}, opaque,
                        # a classmethod's `cls` (by convention) is given by Python
                        skip_self=bound or summary.self_name is not None or _is_classmethod(summary),
                    ))
        return {v for arguments in matched for name, values in arguments if name == parameter for v in values}

    def _through_parameter(self, summary: FunctionSummary, parameter: str, call: Expr, frame: Frame) -> set | None:
        """`block(channels, norm=norm)` in a builder `make_layer(block, channels, norm)`: the
        class and the arguments come from the same call of the builder, so each call of it is
        looked at on its own (`make_layer(GroupBlock, norm="gn")` builds no GroupBlock with
        the `norm="bn"` of another call). None when `call` calls no parameter of the
        builder, or the project never calls the builder."""
        builder = self.summary(frame.function) if frame.function is not None else None
        module = self._module_of(frame.function) if builder is not None else None
        if module is None or not any(p.name == call[1][1] for p in builder.parameters):
            return None
        key = ("through", builder.name, summary.name, parameter)
        if key in self._active:
            return set()
        # Cheap first: whether the project hands the builder this class at all.
        handed = self._passed_by_callers(builder, call[1][1])
        if not handed:
            return None
        if not any(isinstance(v, ClassRef) and f"{v.name}.__init__" == summary.name for v in handed):
            return set()
        self._active.add(key)
        values: set = set()
        try:
            for bound in self._builder_calls(builder, module):
                values |= self._argument_at(summary, parameter, call, replace(frame, arguments=bound, entry=False))
        finally:
            self._active.discard(key)
        return values

    def _builder_calls(self, builder: FunctionSummary, module: str) -> list[Arguments]:
        """What each of the project's calls of a builder binds its parameters to (once per builder)."""
        found = self._builder_bindings.get(builder.name)
        if found is None:
            parameters = [p.name for p in builder.parameters if p.kind not in ("*", "**")]
            found = []
            for _, outer, outer_call, line in self._call_sites.of(builder.name, module):
                outer_frame = replace(self._entry_frame(outer.name), before=line + 1)
                bound = tuple(
                    (name, frozenset(passed)) for name in parameters
                    if (passed := self._argument_at(builder, name, outer_call, outer_frame))
                )
                if bound:
                    found.append(bound)
            self._builder_bindings[builder.name] = found
        return found

    def _entry_frame(self, function: str) -> Frame:
        """The frame of a function looked at on its own, with its class's instance as `self`."""
        module = self._module_of(function) or ""
        parts = function.split(".")
        owner = next(
            (".".join(parts[:end]) for end in range(len(parts) - 1, len(module.split(".")), -1)
             if self.index.class_named(".".join(parts[:end])) is not None),
            None,
        )
        return self.frame_of(function, module, self.instance(owner) if owner is not None else None)


def _collect_value_names(expr: Expr, found: set[str]) -> None:
    """The global names a summary expression holds other than as what a call calls."""
    if not isinstance(expr, tuple) or not expr:
        return
    if not isinstance(expr[0], str):  # a tuple of expressions (arguments, dict entries)
        for part in expr:
            _collect_value_names(part, found)
    elif expr[0] == "name" and isinstance(expr[1], str):
        found.add(expr[1])
    elif expr[0] == "call":
        callee = expr[1]
        if callee[0] != "name":
            _collect_value_names(callee, found)
        for part in (*expr[2], *(value for _, value in expr[3])):
            _collect_value_names(part, found)
    else:
        for part in expr[1:]:
            if isinstance(part, tuple):
                _collect_value_names(part, found)


def _is_classmethod(summary: FunctionSummary) -> bool:
    return bool(summary.parameters) and summary.parameters[0].name == "cls"


def _last_name(callee: Expr) -> str | None:
    if callee[0] == "attr":
        return callee[2]
    if callee[0] == "name":
        return callee[1]
    return None
