"""CKPT008 in YAML / JSON documents: a DeepSpeed config's `activation_checkpointing` section
that nothing in the project applies (`ckptlint.model.library.deepspeed`). A DeepSpeed config
is recognised by its keys (`zero_optimization`, `train_micro_batch_size_per_gpu`, an `fp16`
mapping...), at the top of the document or nested under another key (a Hydra config's
`deepspeed:`), never by the file's name."""

from __future__ import annotations

from collections.abc import Iterator

from ckptlint.model.library.deepspeed import (
    ACTIVATION_CHECKPOINTING_SECTION, is_deepspeed_config, requested_activation_checkpointing, unused_section_message,
)
from ckptlint.model.syntax.recipe_documents import Settings
from ckptlint.recipes.checks import RecipeFinding

CODE = "CKPT008"
_UNKNOWN = object()  # a YAML / JSON value is always known


def unused_sections(settings: Settings) -> Iterator[RecipeFinding]:
    """A finding at each DeepSpeed `activation_checkpointing` key whose section asks for a
    setting; the caller has established that the project never applies such a section."""
    for key, setting in settings.items():
        if key[-1] != ACTIVATION_CHECKPOINTING_SECTION or not isinstance(setting.value, dict):
            continue
        parent = key[:-1]
        siblings = {k[-1]: s.value for k, s in settings.items() if len(k) == len(key) and k[:-1] == parent}
        if not is_deepspeed_config(siblings, lambda value: isinstance(value, dict)):
            continue
        asked = requested_activation_checkpointing({str(k): v for k, v in setting.value.items()}, _UNKNOWN)
        if asked:
            yield RecipeFinding(CODE, unused_section_message(asked), (setting,))
