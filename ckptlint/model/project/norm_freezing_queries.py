"""The project index's questions about BatchNorm frozen by the project's own code
(`ckptlint.model.file_facts.norm_freezing`): classes whose `train()` keeps every BatchNorm below them in
eval mode, functions that put the BatchNorms below their parameter in eval mode or replace
them by frozen copies, and functions for `Module.apply` that put a BatchNorm in eval mode. A
mixin of `ckptlint.model.project.project_facts.ProjectFacts`, which provides `_files_of_kind`."""

from __future__ import annotations

from ckptlint.model.project.reads import tracked_cached_property

from ckptlint.model.file_facts.facts import ClassFacts, EventKind, FileFacts

NORM_FREEZING_KIND = "norm_freezing"
_FREEZING_EVENTS = (EventKind.FREEZES_BATCHNORM, EventKind.FREEZES_BATCHNORM_APPLIED)


def freezes_batchnorm(facts: FileFacts) -> bool:
    """Whether a file holds any of what the questions below collect."""
    return any(c.batchnorm_frozen_under is not None for c in facts.classes) or any(
        e.kind in _FREEZING_EVENTS for f in facts.functions for e in f.events
    )


class NormFreezingQueries:
    @tracked_cached_property(cutoff=True)
    def batchnorm_freezers(self) -> tuple[ClassFacts, ...]:
        """The classes whose `train()` puts every BatchNorm below them in eval mode
        (`ckptlint.model.file_facts.norm_freezing`)."""
        return tuple(
            c for _, facts in self._files_of_kind(NORM_FREEZING_KIND) for c in facts.classes
            if c.batchnorm_frozen_under is not None
        )

    @tracked_cached_property(cutoff=True)
    def batchnorm_freezing_functions(self) -> tuple[tuple[str, str], ...]:
        """(function, parameter): functions that put every BatchNorm below their parameter in
        eval mode (`freeze_bn(model)`; `ckptlint.model.file_facts.norm_freezing.frozen_parameter`) or
        replace them by frozen copies (`convert_frozen_batchnorm`, `converted_parameter`)."""
        return tuple(
            (f.name, e.target) for _, facts in self._files_of_kind(NORM_FREEZING_KIND) for f in facts.functions
            for e in f.events if e.kind is EventKind.FREEZES_BATCHNORM
        )

    @tracked_cached_property(cutoff=True)
    def batchnorm_freezers_applied(self) -> tuple[str, ...]:
        """Functions that put the module they are given in eval mode when it is a BatchNorm,
        for `Module.apply` (`set_bn_eval`; `ckptlint.model.file_facts.norm_freezing.frozen_when_applied`)."""
        return tuple(
            f.name for _, facts in self._files_of_kind(NORM_FREEZING_KIND) for f in facts.functions
            if any(e.kind is EventKind.FREEZES_BATCHNORM_APPLIED for e in f.events)
        )
