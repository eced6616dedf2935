"""Parameters resolved at their call sites: what the project's calls pass a function for a
parameter nothing else binds (`def apply_checkpointing(model): ...` called as
`apply_checkpointing(ResNet())` in another file), a mixin of the evaluator
(`ckptlint.model.evaluation.denotation.Denotation`). Where to look is the call graph's
(`ckptlint.model.project.call_sites`); which call really calls the function is decided here."""

from __future__ import annotations

from dataclasses import replace

from ckptlint.model.project.call_sites import last_name
from ckptlint.model.syntax.names import is_test_path
from ckptlint.model.form.summary import Expr, FunctionSummary
from ckptlint.model.form.values import (
    NOTHING, QUERY_BUDGET, Arguments, ClassRef, Constant, Frame, FunctionRef, Instance, OutOfBudget, falsy,
)


class CallSiteResolution:
    """A mixin of `ckptlint.model.evaluation.denotation.Denotation`: parameters resolved at call sites."""

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
            for path, caller, call, line in self.call_sites.of(summary.name, module):
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
        calls = [call for call, at in calling.passes if at == line and last_name(call[1]) == short]
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
            if at != line or last_name(call[1]) != short or not (call[2] or call[3]):
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
            for path, caller, call, line in self.call_sites.of(summary.name, module):
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
                for path, caller, expr, line in self.call_sites.parallelized(summary.name, module):
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
            for path, caller, callee, line in self.call_sites.calls_of(function, module):
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
            if not self.call_sites.named_as_value(summary.name, module):
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
        for path, caller, callee, line in self.call_sites.calls_of(summary.name, module):
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
        if summary is None or module is None or self.call_sites.named_as_value(function, module):
            return None
        sites: list[tuple[str, int]] = []
        for path, caller, callee, line in self.call_sites.calls_of(function, module):
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
            for _, outer, outer_call, line in self.call_sites.of(builder.name, module):
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


def _is_classmethod(summary: FunctionSummary) -> bool:
    return bool(summary.parameters) and summary.parameters[0].name == "cls"
