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
from typing import TYPE_CHECKING

from ckptlint.model.names import is_test_path
from ckptlint.model.summary import Expr, FunctionSummary
from ckptlint.model.values import NOTHING, Arguments, ClassRef, Frame, FunctionRef, Instance, OutOfBudget, falsy

if TYPE_CHECKING:
    from ckptlint.model.index import ProjectIndex


class CallSites:
    def __init__(self, index: ProjectIndex) -> None:
        self.index = index
        self._namers: dict[str, list[str]] | None = None

    def of(self, function: str, module: str) -> Iterator[tuple[str, FunctionSummary, Expr, int]]:
        """(path, calling function, call, line) for every call whose callee's last name is
        `function`'s, in the files that can name it."""
        owner, _, short = function.rpartition(".")
        if short == "__init__":  # a constructor is called by its class's name
            short = owner.rsplit(".", 1)[-1]
        for path in self.candidates(function, module):
            facts = self.index.files.get(path)
            for caller in facts.summaries if facts is not None else ():
                for call, line in caller.passes:
                    if _last_name(call[1]) == short:
                        yield path, caller, call, line

    def candidates(self, function: str, module: str) -> list[str]:
        own = self.index.module_paths.get(module)
        found = {own} if own is not None else set()
        parts = function.split(".")
        namers = self._names_table()
        for end in range(len(module.split(".")), len(parts) + 1):
            for start in range(end):
                found.update(namers.get(".".join(parts[start:end]), ()))
        return sorted(found)

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

    def _passed_at_call(self, function: str, parameter: str, caller: str, line: int) -> tuple[frozenset, bool]:
        summary, calling = self.summary(function), self.summary(caller)
        if summary is None or calling is None:
            return NOTHING, False
        short = function.rsplit(".", 1)[-1]
        for call, at in calling.passes:
            if at != line or _last_name(call[1]) != short:
                continue
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
        sites: list[tuple[str, int, str]] = []
        try:
            for path, caller, call, line in self._call_sites.of(summary.name, module):
                passed = self._argument_at(summary, parameter, call, replace(self._entry_frame(caller.name), before=line + 1))
                if any(not falsy(v) for v in passed):
                    values |= passed
                    sites.append((path, line, caller.name))
                    self._site_values[(summary.name, parameter, path, line)] = frozenset(passed)
        finally:
            self._active.discard(key)
        found = self._passed[key] = frozenset(values)
        self._passed_at[key] = sites
        return found

    def _argument_at(self, summary: FunctionSummary, parameter: str, call: Expr, frame: Frame) -> set:
        """What `call`, in `frame`, passes for `parameter` when it calls `summary`'s function."""
        func = call[1]
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
                        skip_self=bound or summary.self_name is not None,
                    ))
        return {v for arguments in matched for name, values in arguments if name == parameter for v in values}

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


def _last_name(callee: Expr) -> str | None:
    if callee[0] == "attr":
        return callee[2]
    if callee[0] == "name":
        return callee[1]
    return None
