"""What a caller of a module must leave alone until backward, across functions: the
containers and objects it passes for the parameters the module's regions read, and the
module's attributes they read (`ckptlint.model.recompute_reads`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.model_expressions import written_name
from ckptlint.model.recompute_reads import RecomputeReads

from .changes import Mutation


@dataclass(frozen=True)
class Watch:
    """Something a caller must leave alone until backward: a name it changes (or, for an
    object, any attribute below it), how the message names it, the checkpoint call's line."""

    target: str
    what: str
    line: int
    below: bool = False  # `cfg`: any `cfg.<attr> = ...`

    def matches(self, change: Mutation) -> bool:
        if self.below:
            return change.how == "reassigned" and change.target.startswith(f"{self.target}.")
        return change.target == self.target


def watches(
    call: cst.Call,
    reads: RecomputeReads,
    is_container: Callable[[cst.BaseExpression], bool],
    is_object: Callable[[cst.BaseExpression], bool],
) -> list[Watch]:
    """What a caller must leave alone until backward: the containers (and config objects) it
    passes for the parameters the regions read, the attributes of the module it calls that
    they read (`net.blk.use_gelu`, `net.layers[*].use_gelu` for each layer)."""
    watched: list[Watch] = []
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    for position, name, line in reads.parameters:
        keyword = next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)
        arg = keyword if keyword is not None else positional[position] if 0 <= position < len(positional) else None
        passed = written_name(arg.value) if arg is not None else None
        if passed is not None and is_container(arg.value):
            watched.append(Watch(passed, f"it is passed as `{name}`, which", line))
        elif passed is not None and is_object(arg.value):
            watched.append(Watch(passed, f"`{passed}` is passed as `{name}`, which", line, below=True))
    owner = written_name(call.func)
    if owner is not None:
        for attribute, line in reads.attributes:
            container, _, member = attribute.partition("[*].")
            what = f"`{member}` of each of `{container}`" if member else f"`{attribute}`"
            watched.append(Watch(f"{owner}.{attribute}", what, line))
    return watched
