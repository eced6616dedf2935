"""Checkpoint wrappers a model class applies when it is built, and the FSDP1 auto-wraps that
come later:

    model.py:   class Encoder(nn.Module):
                    def __init__(self):
                        layers = [checkpoint_wrapper(l, checkpoint_impl=CheckpointImpl.REENTRANT) for l in ...]
    train.py:   model = FSDP(Encoder(), auto_wrap_policy=policy)

Building the model always comes first, so the auto-wrap puts its units inside the
wrappers (`CheckpointWrapper(FSDP(EncoderLayer))`), as `apply_activation_checkpointing`
before the wrap does (CKPT003).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ckptlint.analysis.fsdp import holds_instance_of
from ckptlint.model.file_facts.facts import Event, EventKind, FsdpKind, FsdpUse
from ckptlint.model.index import ProjectIndex
from ckptlint.model.library.torch import FSDP1
from ckptlint.model.form.summary import dotted_absolute
from ckptlint.model.form.values import Instance, ordering_key


@dataclass(frozen=True)
class ConstructionWrap:
    """A checkpoint wrapper applied in a class's constructor (`event`), and an FSDP1 wrap
    with an auto-wrap policy of a model holding an instance of the class (`use`)."""

    owner: str  # the class, absolute
    event: Event
    use: FsdpUse
    model: Instance  # what the FSDP call wraps


def wrapped_at_construction(project: ProjectIndex, relative_path: str) -> list[ConstructionWrap]:
    """The file's constructors applying checkpoint wrappers to their children, each with the
    first FSDP1 auto-wrap of the project reaching the file whose model holds the class."""
    facts = project.files.get(relative_path)
    found: list[ConstructionWrap] = []
    for function in facts.functions if facts is not None else ():
        owner, _, method = function.name.rpartition(".")
        if method != "__init__" or project.class_named(owner) is None:
            continue
        events = [
            e for e in function.events
            if e.kind is EventKind.CHECKPOINT and e.api.rsplit(".", 1)[-1] == "checkpoint_wrapper"
            and _always_applied(project, function.name, facts.module, owner, e.line)
        ]
        if not events:
            continue
        wrap = _auto_wrap_holding(project, relative_path, owner)
        if wrap is not None:
            found.extend(ConstructionWrap(owner, event, *wrap) for event in events)
    return found


def _always_applied(project: ProjectIndex, constructor: str, module: str, owner: str, line: int) -> bool:
    """Whether the constructor's binding on `line` (`layers = [checkpoint_wrapper(l) ...]`,
    `self.blocks.append(checkpoint_wrapper(b))`) runs in every instance the project builds:
    the `if` tests above it are known to hold (`if use_ac:` with `use_ac=True` by default and
    in every construction). A wrapper that binds nothing is not followed."""
    denotation = project.denotation
    summary = denotation.summary(constructor)
    bindings = [b for b in summary.bindings if b.line == line] if summary is not None else []
    if not bindings:
        return False
    frame = denotation.frame_of(constructor, module, denotation.instance(owner))
    return all(denotation.always_holds(b.conditions, replace(frame, before=line)) for b in bindings)


def _auto_wrap_holding(project: ProjectIndex, relative_path: str, owner: str) -> tuple[FsdpUse, Instance] | None:
    for use in sorted(project.fsdp_uses_reaching(relative_path), key=lambda u: (u.path, u.line)):
        if use.kind is not FsdpKind.FSDP1:
            continue
        for model in sorted(_auto_wrapped_models(project, use), key=ordering_key):
            if holds_instance_of(project, model, owner):
                return use, model
    return None


def _auto_wrapped_models(project: ProjectIndex, use: FsdpUse) -> frozenset:
    """The module instances an FSDP1 call with an auto-wrap policy wraps, from the summary of
    the function holding it (`model = FSDP(Encoder(), auto_wrap_policy=policy)`, the
    model built in the call or bound to a name before)."""
    facts = project.files.get(use.path)
    if facts is None:
        return frozenset()
    names = dict(facts.names)
    denotation = project.denotation
    found: set = set()
    for summary in facts.summaries:
        calls = [b.value for b in summary.bindings if b.line == use.line]
        for call in calls:
            if call[0] != "call" or dotted_absolute(call[1], names) not in FSDP1 or not call[2]:
                continue
            policy = dict((k, v) for k, v in call[3] if k is not None).get("auto_wrap_policy")
            if policy is None or policy == ("const", None):
                continue
            owner_class, _, _ = summary.name.rpartition(".")
            self_instance = denotation.instance(owner_class) if project.class_named(owner_class) else None
            frame = replace(denotation.frame_of(summary.name, facts.module, self_instance), before=use.line)
            found |= {v for v in denotation.evaluate(call[2][0], frame) if isinstance(v, Instance)}
    return frozenset(found)
