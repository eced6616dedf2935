"""What CKPT006 asks of a file being linted: the DDP uses with `find_unused_parameters=True`
(the project index's `ddp_uses_reaching`) that can wrap the model holding a checkpoint.

A use counts for a checkpoint in a method of class `owner` when it is not static
(`static_graph=True` makes reentrant checkpointing work: CKPT006's evidence) and either the
module it wraps is known to the project model and is, or holds, an instance of `owner` (or
shares a project base class with it: a table may pick either), or the module it wraps is
not known (a `Trainer`'s arguments, accelerate's kwargs handler, Lightning's strategy, a
value the model cannot follow). A wrap of a known model that holds no such instance (a GAN's
discriminator, an EMA teacher) does not count."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ckptlint.analysis.fsdp import holds_instance_of, shares_project_class
from ckptlint.model.form.summary import dotted_expression
from ckptlint.model.file_facts.facts import DdpKind, DdpUse
from ckptlint.model.form.values import Instance, ordering_key
from ckptlint.model.syntax.names import module_name

if TYPE_CHECKING:
    from ckptlint.model.index import ProjectIndex
    from ckptlint.rule import FileContext


@dataclass(frozen=True)
class DdpReach:
    use: DdpUse
    holder: str = ""  # the wrapped module's class, when known to hold the checkpoint's class
    target: str = ""

    def describe(self) -> str:
        where = f"{self.use.how} at {self.use.path}:{self.use.line}"
        if not self.holder:
            return where
        return f"{where}, which wraps `{self.target}`, a `{self.holder}`" if self.target else f"{where}, which wraps a `{self.holder}`"


def ddp_reaching(context: FileContext, owner: str | None, *, plain_too: bool = False) -> DdpReach | None:
    """The DDP use with unused-parameter detection (with `plain_too`, any DDP use) that can
    wrap the model of a checkpoint in a method of `owner` (None: a function outside classes,
    counted only for uses whose model is not known); a known holder first, the file's own
    uses before others."""
    project = context.project
    uses = sorted(
        (use for use in project.ddp_uses_reaching(context.relative_path, plain_too=plain_too) if not use.static_graph),
        key=lambda use: (use.path != context.relative_path, use.path, use.line),
    )
    unknown: DdpReach | None = None
    for use in uses:
        models = wrapped_models(project, use)
        if not models:
            unknown = unknown or DdpReach(use)
            continue
        if owner is None:
            continue
        for model in sorted(models, key=ordering_key):
            if holds_instance_of(project, model, owner):
                return DdpReach(use, model.short_name, use.target)
            if shares_project_class(project, model, owner):
                unknown = unknown or DdpReach(use)
    return unknown


def wrapped_models(project: ProjectIndex, use: DdpUse) -> frozenset:
    """The module instances a `DistributedDataParallel(model, ...)` call wraps; empty when not known."""
    if use.kind is not DdpKind.TORCH or not use.function:
        return frozenset()
    denotation = project.denotation
    if use.built:
        return frozenset({denotation.instance(use.built)}) if project.class_named(use.built) is not None else frozenset()
    if not use.target:
        return frozenset()
    if use.path not in project.files:  # (what the frame needs is read by its own keys, not the file's facts)
        return frozenset()
    owner_class, _, _ = use.function.rpartition(".")
    self_instance = denotation.instance(owner_class) if project.class_named(owner_class) else None
    frame = replace(denotation.frame_of(use.function, module_name(use.path), self_instance), before=use.line + 1)
    return frozenset(v for v in denotation.evaluate(dotted_expression(use.target), frame) if isinstance(v, Instance))
