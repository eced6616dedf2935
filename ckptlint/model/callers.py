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
from typing import TYPE_CHECKING

from ckptlint.model.summary import Expr, FunctionSummary

if TYPE_CHECKING:
    from ckptlint.model.index import ProjectIndex


class CallSites:
    def __init__(self, index: ProjectIndex) -> None:
        self.index = index
        self._namers: dict[str, list[str]] | None = None

    def of(self, function: str, module: str) -> Iterator[tuple[str, FunctionSummary, Expr, int]]:
        """(path, calling function, call, line) for every call whose callee's last name is
        `function`'s, in the files that can name it."""
        short = function.rsplit(".", 1)[-1]
        for path in self._candidates(function, module):
            facts = self.index.files.get(path)
            for caller in facts.summaries if facts is not None else ():
                for call, line in caller.passes:
                    if _last_name(call[1]) == short:
                        yield path, caller, call, line

    def _candidates(self, function: str, module: str) -> list[str]:
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


def _last_name(callee: Expr) -> str | None:
    if callee[0] == "attr":
        return callee[2]
    if callee[0] == "name":
        return callee[1]
    return None
