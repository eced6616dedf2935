"""The project index's questions about DeepSpeed's activation checkpointing (CKPT008): what in
the project makes a DeepSpeed config's `activation_checkpointing` section live, and whether
its code hands DeepSpeed configs to a library that never does. A mixin of
`ckptlint.model.index.ProjectIndex`, which provides `files`, `files_with`, `_files_of_kind`,
`_paths_of_kind` and `module_paths`."""

from __future__ import annotations

from ckptlint.model.project.reads import tracked_cached_property

from ckptlint.model.file_facts.facts import FileFacts
from ckptlint.model.library.deepspeed import NON_CONFIGURING_PACKAGES

DEEPSPEED_WIRING_KIND = "deepspeed_wiring"  # files naming DeepSpeed's checkpointing (`deepspeed_wiring`)
DEEPSPEED_CONSUMER_KIND = "deepspeed_consumers"  # files importing deepspeed, transformers, accelerate or TRL


def hands_on_deepspeed_configs(facts: FileFacts) -> bool:
    """Whether the file imports a package that passes DeepSpeed configs to
    `deepspeed.initialize` without calling `deepspeed.checkpointing.configure`."""
    return any(absolute.partition(".")[0] in NON_CONFIGURING_PACKAGES for _, absolute in facts.names)


class DeepSpeedQueries:
    @tracked_cached_property(cutoff=True)
    def deepspeed_checkpointing_wiring(self) -> tuple[tuple[str, str], ...]:
        """(path, name) of what makes a DeepSpeed `activation_checkpointing` section live:
        `deepspeed.checkpointing.configure`, DeepSpeed's checkpoint functions or
        `PipelineModule` named anywhere, or a configuring package imported from outside the
        project (a `megatron` of the project's own counts through its own calls)."""
        own_megatron = any(m == "megatron" or m.startswith("megatron.") for m in self.module_paths)
        return tuple(
            (path, name)
            for path, facts in self._files_of_kind(DEEPSPEED_WIRING_KIND)
            for name in facts.deepspeed_wiring
            if not (name == "megatron" and own_megatron)
        )

    @tracked_cached_property(cutoff=True)
    def hands_on_deepspeed_configs(self) -> bool:
        """Whether some Python file of the project uses a library that hands DeepSpeed
        configs on without configuring DeepSpeed's checkpointing (who reads a config file
        is otherwise unknown)."""
        if self.files_with is not None:
            return bool(self._paths_of_kind(DEEPSPEED_CONSUMER_KIND))
        return any(hands_on_deepspeed_configs(facts) for facts in self.files.values())

    @property
    def deepspeed_section_unused(self) -> bool:
        """Whether a DeepSpeed config's `activation_checkpointing` section is a no-op in this
        project: its code hands configs on, and nothing configures or runs DeepSpeed's
        checkpointing."""
        return self.hands_on_deepspeed_configs and not self.deepspeed_checkpointing_wiring
