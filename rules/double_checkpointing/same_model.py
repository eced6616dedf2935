"""Hugging Face gradient checkpointing and torch's checkpoint wrappers applied to the same
model in one function of a file (CKPT005), from the index's wrap steps."""

from __future__ import annotations

from ckptlint.analysis.fsdp import WrapStep, wrap_steps
from ckptlint.model.file_facts.facts import EventKind
from ckptlint.model.index import ProjectIndex


def same_model_twice(project: ProjectIndex, relative_path: str) -> list[tuple[WrapStep, WrapStep]]:
    """(later, earlier) pairs of HF gradient checkpointing and torch's wrappers applied to
    the same model in one of the file's functions."""
    found = []
    facts = project.files.get(relative_path)
    for function in facts.functions if facts is not None else ():
        first: dict[int, dict[EventKind, WrapStep]] = {}
        for step in wrap_steps(function, project):
            if step.kind not in (EventKind.CHECKPOINT, EventKind.HF_GC):
                continue
            other_kind = EventKind.CHECKPOINT if step.kind is EventKind.HF_GC else EventKind.HF_GC
            seen = first.setdefault(step.model, {})
            other = seen.pop(other_kind, None)
            if other is not None:
                found.append((step, other))
            else:
                seen.setdefault(step.kind, step)
    return found


def describe(step: WrapStep) -> str:
    if step.kind is EventKind.HF_GC:
        return "gradient_checkpointing_enable"
    return step.event.api.rsplit(".", 1)[-1] if step.effect is None else "activation checkpointing"
