"""What a module's `forward` hands the regions it checkpoints, seen from the code that calls
the module: the `forward` parameters a checkpointed region reads
(`checkpoint(self._step, x, opts)` in `forward(self, x, opts)`), and the attributes of the
module it reads (`self.act_mode` in the checkpointed method, `use_gelu` of the checkpointed
submodule `self.blk`: `blk.use_gelu`). A caller that changes one of them after calling the
module and before backward changes what the recomputation runs (CKPT031 across functions).

Followed: `forward` (its own or a base's) and the methods of the class it calls; the
callable of each checkpoint call: a method (its `self` reads, and the methods it calls), a
function nested in the method, a submodule attribute (its class's `forward`, through the
project model), a lambda (the names and `self.<attr>` it reads).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckptlint.model.file_facts.facts import CheckpointCall, MethodFacts
from ckptlint.model.form.values import Instance, Sequence

if TYPE_CHECKING:
    from ckptlint.model.index import ProjectIndex


@dataclass(frozen=True)
class RecomputeReads:
    """What a checkpointed region under one module class's `forward` reads that its caller
    can change."""

    forward: str  # the absolute name of the `forward` method
    path: str  # the file of the checkpoint calls, relative to the project root
    # (position among the call's arguments, -1 for keyword-only; name; checkpoint call line)
    parameters: tuple[tuple[int, str, int], ...]
    attributes: tuple[tuple[str, int], ...]  # (path below the instance: `act_mode`, `blk.use_gelu`; line)

    def attribute_line(self, path: str) -> int:
        return next(line for found, line in self.attributes if found == path)


def recompute_reads(index: ProjectIndex, class_name: str) -> RecomputeReads | None:
    """What the regions `class_name`'s `forward` checkpoints read, or None (no region, or
    one the model cannot follow)."""
    found = _method(index, class_name, "forward")
    if found is None:
        return None
    owner, forward = found
    summary = index.function_summary(f"{owner}.forward")
    parameters = [
        p.name for p in (summary.parameters if summary is not None else ())
        if p.kind == "positional" and p.name != (summary.self_name or "self")
    ]
    keyword_only = {p.name for p in (summary.parameters if summary is not None else ()) if p.kind == "keyword"}
    read_parameters: dict[str, tuple[int, int]] = {}
    attributes: dict[str, int] = {}
    for method_name, call in _checkpoint_calls(index, class_name, forward):
        if method_name == forward.name:
            for name in call.reads:
                if name in parameters:
                    read_parameters.setdefault(name, (parameters.index(name), call.line))
                elif name in keyword_only:
                    read_parameters.setdefault(name, (-1, call.line))
        for attribute in (
            *(name.removeprefix("self.") for name in call.reads if name.startswith("self.")),
            *sorted(_callable_reads(index, class_name, method_name, call.callable)),
        ):
            attributes.setdefault(attribute, call.line)
    if not read_parameters and not attributes:
        return None
    return RecomputeReads(
        f"{owner}.forward", index.path_of(f"{owner}.forward") or "?",
        tuple(sorted((position, name, line) for name, (position, line) in read_parameters.items())),
        tuple(sorted(attributes.items())),
    )


def forward_checkpoint_calls(index: ProjectIndex, class_name: str) -> list[tuple[str, str, CheckpointCall]]:
    """(class defining the method, method name, call) for each checkpoint call `class_name`'s
    `forward` runs: its own, those of the methods it calls and of functions nested in them."""
    found = _method(index, class_name, "forward")
    if found is None:
        return []
    calls = []
    for method_name, call in _checkpoint_calls(index, class_name, found[1]):
        holder = _method(index, class_name, method_name)
        calls.append((holder[0] if holder is not None else class_name, method_name, call))
    return calls


def _method(index: ProjectIndex, class_name: str, method: str) -> tuple[str, MethodFacts] | None:
    """The method as the class runs it: its own, or the first base's that defines it."""
    for owner in index.ancestors(class_name):
        facts = index.class_named(owner)
        if facts is None:
            continue
        for found in facts.methods:
            if found.name == method:
                return facts.name, found
    return None


def _called_methods(index: ProjectIndex, class_name: str, start: MethodFacts) -> list[MethodFacts]:
    """`start` and the methods of the class it calls, transitively."""
    seen, pending, found = {start.name}, [start], []
    while pending:
        method = pending.pop()
        found.append(method)
        for name in method.methods:
            callee = _method(index, class_name, name)
            if callee is not None and callee[1].name not in seen:
                seen.add(callee[1].name)
                pending.append(callee[1])
    return found


def _checkpoint_calls(index: ProjectIndex, class_name: str, forward: MethodFacts) -> list[tuple[str, CheckpointCall]]:
    """The checkpoint calls `forward` runs: its own, those of the methods it calls and of the
    functions nested in them."""
    found = []
    for method in _called_methods(index, class_name, forward):
        nested = [m for m in _class_methods(index, class_name) if m.name.startswith(f"{method.name}.")]
        for holder in (method, *nested):
            found.extend((method.name, call) for call in holder.checkpoints)
    return found


def _class_methods(index: ProjectIndex, class_name: str) -> list[MethodFacts]:
    return [m for owner in index.ancestors(class_name) if (facts := index.class_named(owner)) for m in facts.methods]


def _attributes_read(index: ProjectIndex, class_name: str, method: MethodFacts) -> set[str]:
    return {attribute for m in _called_methods(index, class_name, method) for attribute in m.attributes}


def _callable_reads(index: ProjectIndex, class_name: str, method_name: str, callable_: str) -> set[str]:
    """The attribute paths below the instance that a checkpoint's callable reads."""
    if callable_.startswith("self.") and callable_.count(".") == 1:
        attribute = callable_.removeprefix("self.")
        each = attribute.endswith("[*]")  # a loop variable over `self.layers`: each member
        attribute = attribute.removesuffix("[*]")
        own = _method(index, class_name, attribute) if not each else None
        if own is not None:
            return _attributes_read(index, class_name, own[1])
        path = callable_.removeprefix("self.")  # `blk`, `layers[*]`
        found = {path}
        denotation = index.denotation
        values = denotation.attribute(denotation.instance(class_name), attribute)
        for value in _members(values) if each else values:
            if isinstance(value, Instance):
                sub = _method(index, value.cls, "forward")
                if sub is not None:
                    found.update(f"{path}.{read}" for read in _attributes_read(index, value.cls, sub[1]))
        return found
    if callable_ and "." not in callable_:  # a function nested in the method
        nested = _method(index, class_name, f"{method_name}.{callable_}")
        if nested is not None:
            return _attributes_read(index, class_name, nested[1])
    return set()


def _members(values: frozenset) -> set:
    """The members of the torch containers and lists among `values`."""
    found = set()
    for value in values:
        if isinstance(value, Instance) and value.members is not None:
            found.update(member for members in value.members for member in members)
        elif isinstance(value, Sequence):
            found.update(value.elements)
    return found
