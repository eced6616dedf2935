"""The project index's question about parameters frozen from outside a module's class
(`ckptlint.model.file_facts.freezing`): which attributes of a class's instances the project's
scripts and wrappers freeze (`model.embed.requires_grad_(False)` in `train.py`, with `model =
Net()`), and which they, or anything else, may make trainable again. A mixin of
`ckptlint.model.index.ProjectIndex`, which provides `_files_of_kind`, `_record`,
`denotation`, `ancestors` and `class_named`."""

from __future__ import annotations

from dataclasses import dataclass, replace

from ckptlint.model.file_facts.facts import EventKind, FileFacts, FunctionFacts
from ckptlint.model.file_facts.freezing import CONDITIONAL
from ckptlint.model.form.summary import dotted_expression
from ckptlint.model.form.values import Instance

FREEZING_KIND = "freezing"
WHOLE = "*"  # the instance itself (`model.requires_grad_(False)`)
_EVENTS = (EventKind.FREEZES_PARAMETERS, EventKind.UNFREEZES_PARAMETERS)


def freezes_parameters(facts: FileFacts) -> bool:
    return any(e.kind in _EVENTS for f in facts.functions for e in f.events)


@dataclass(frozen=True)
class Freezing:
    """One freezing of an instance's attribute (`WHOLE`: the instance) that always runs where
    it is written."""

    attribute: str
    function: str  # the function that freezes it (`train.main`, `train.<module>`)
    api: str  # "" or `WEIGHT`: the weight alone
    where: str  # `train.py:12`
    written: str  # `model.embed`
    # Of the whole instance: the attributes the same function makes trainable again
    # (`model.requires_grad_(False)`, then `model.head.requires_grad_(True)`).
    kept_trainable: frozenset[str] = frozenset()


@dataclass(frozen=True)
class OutsideFreezing:
    """What the project does to the parameters of a class's instances from outside the class."""

    freezings: tuple[Freezing, ...]
    # Attributes (`WHOLE`) that code apart from the freezing functions may make trainable
    # again (a trainer's method that unfreezes the embedding after some epochs).
    unfrozen: frozenset[str]

    def holds(self, attribute: str) -> Freezing | None:
        """How `attribute` is frozen (by itself or with the whole instance), when nothing
        makes it trainable again."""
        if WHOLE in self.unfrozen or attribute in self.unfrozen:
            return None
        return next((f for f in self.freezings if f.attribute == attribute), None) or next(
            (f for f in self.freezings if f.attribute == WHOLE and attribute not in f.kept_trainable), None
        )


class FreezingQueries:
    def frozen_from_outside(self, owner: str) -> OutsideFreezing:
        """What code outside class `owner` freezes of its instances (or of a subclass's): each
        freezing statement's module resolved by the project model in its function's frame
        (`model.embed` with `model = Net(...)` before it is `embed` of a `Net`). A function's
        freezing counts less what the same function makes trainable again or freezes only
        sometimes; what a function that freezes nothing of an `owner` makes trainable counts
        against every freezing (a trainer's method unfreezing after some epochs)."""
        freezings: list[Freezing] = []
        unfrozen: set[str] = set()
        for path, facts in self._files_of_kind(FREEZING_KIND):
            for function in facts.functions:
                events = [e for e in function.events if e.kind in _EVENTS]
                if not events:
                    continue
                self._record(f"fn:{function.name}")  # the lines a finding cites
                attributes = [
                    (event, self._owned_attribute(function, facts.module, event.target, event.line, owner))
                    for event in events
                ]
                frozen_here = [
                    (event, attribute) for event, attribute in attributes
                    if attribute is not None and event.kind is EventKind.FREEZES_PARAMETERS and event.source != CONDITIONAL
                ]
                # Made trainable here: what the model names, and a module it cannot name
                # (`for m in (model.embed, model.head): m.requires_grad_()`) may be anything.
                trainable_here = {
                    attribute if attribute is not None else WHOLE
                    for event, attribute in attributes
                    if event.kind is EventKind.UNFREEZES_PARAMETERS or (attribute is not None and event.source == CONDITIONAL)
                }
                if not any(a is not None and e.kind is EventKind.FREEZES_PARAMETERS for e, a in attributes):
                    # No freezing of an `owner` here: what it makes trainable may be one frozen elsewhere.
                    unfrozen.update(a for e, a in attributes if a is not None and e.kind is EventKind.UNFREEZES_PARAMETERS)
                    continue
                if WHOLE in trainable_here:
                    continue
                for event, attribute in frozen_here:
                    if attribute in trainable_here:
                        continue
                    kept = frozenset(trainable_here) if attribute == WHOLE else frozenset()
                    freezings.append(Freezing(attribute, function.name, event.api, f"{path}:{event.line}", event.target, kept))
        return OutsideFreezing(tuple(freezings), frozenset(unfrozen))

    def _owned_attribute(self, function: FunctionFacts, module: str, target: str, line: int, owner: str) -> str | None:
        """The attribute of an `owner` instance that `target` names in `function` at `line`
        (`WHOLE` for the instance itself); None when no prefix of it is one."""
        denotation = self.denotation
        owner_class, _, _ = function.name.rpartition(".")
        self_instance = denotation.instance(owner_class) if self.class_named(owner_class) is not None else None
        frame = replace(denotation.frame_of(function.name, module, self_instance), before=line + 1)
        parts = target.split(".")
        for length in range(len(parts), 0, -1):
            values = denotation.evaluate(dotted_expression(".".join(parts[:length])), frame)
            if any(isinstance(v, Instance) and owner in self.ancestors(v.cls) for v in values):
                return parts[length] if length < len(parts) else WHOLE
        return None
