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

from collections.abc import Iterator, Mapping
from functools import cached_property
from typing import TYPE_CHECKING

from ckptlint.model.library.lightning import (
    LIGHTNING_FABRIC_SETUP_METHODS, LIGHTNING_MODEL_PARALLEL, LIGHTNING_PARALLELIZE_KEYWORD,
)
from ckptlint.model.form.summary import Expr, FunctionSummary, dotted_absolute

if TYPE_CHECKING:
    from ckptlint.model.project.project_facts import ProjectFacts


class CallSites:
    def __init__(self, index: ProjectFacts) -> None:
        self.index = index
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
                    if last_name(callee) == short or (callee[0] == "name" and callee[1] in parameters):
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
                    if callee[0] == "attr" and callee[2] == "apply" and len(arguments) == 1 and last_name(arguments[0]) == short:
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
                    receiver = last_name(callee[1]) or ""
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
                    short = last_name(value)
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
                    if last_name(callee) == short:
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
                    if call[1][0] != "name" or not any(last_name(a) == class_name for a in call[2]):
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
        parts = function.split(".")
        for end in range(len(module.split(".")) + 1, len(parts) + 1):
            head, rest = ".".join(parts[:end]), parts[end:]
            spellings.extend(".".join([alias, *rest]) for alias in self.index.reexported_as(head))
        return spellings

    def _names_table(self) -> Mapping[str, list[str]]:
        """Every absolute name some file's imports or definitions refer to -> those files."""
        return self.index.names_table


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


def last_name(callee: Expr) -> str | None:
    if callee[0] == "attr":
        return callee[2]
    if callee[0] == "name":
        return callee[1]
    return None
