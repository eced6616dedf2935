from __future__ import annotations

from ckptlint.lazy_libcst import cst
from ckptlint.model.library.deepspeed import (
    ACTIVATION_CHECKPOINTING_SECTION, is_deepspeed_config, requested_activation_checkpointing, unused_section_message,
)
from ckptlint.rule import Rule
from ckptlint.types import Severity

_UNKNOWN = object()  # a value that is not a literal
_LITERALS = {"True": True, "False": False, "None": None}


class DeepspeedActivationCheckpointingConfigUnused(Rule):
    """A DeepSpeed config's `activation_checkpointing` section that nothing in the project applies.

    ## What it does
    Finds DeepSpeed configs with an `activation_checkpointing` section that asks for a
    setting (`partition_activations`, `cpu_checkpointing`, `contiguous_memory_optimization`,
    `synchronize_checkpoint_boundary` or `profile` not false, `number_checkpoints` set) in a
    project whose code hands DeepSpeed configs to a library that never applies the section
    (a file imports `deepspeed`, `transformers`, `accelerate` or `trl`) and that never calls
    `deepspeed.checkpointing.configure(...)` nor checkpoints through DeepSpeed's checkpoint
    (`deepspeed.checkpointing.checkpoint` / `non_reentrant_checkpoint`, an alias of them such
    as Megatron's `mpu.checkpoint = deepspeed.checkpointing.checkpoint`, `PipelineModule`),
    anywhere in the project. A DeepSpeed config is recognised by its keys
    (`zero_optimization`, `train_batch_size`, `train_micro_batch_size_per_gpu`,
    `steps_per_print`, `gradient_clipping`, an `fp16` / `bf16` mapping, ...), not by its
    file's name: a JSON file (`ds_config.json`), a YAML document or a mapping in it (a Hydra
    config's `deepspeed:`), or a dict literal in code (`ds_config = {...}` handed to
    `TrainingArguments(deepspeed=...)` or `deepspeed.initialize(config=...)`). It is
    reported at the `activation_checkpointing` key.

    Not reported: a project that calls `configure` or checkpoints through DeepSpeed's
    checkpoint anywhere (Megatron-DeepSpeed, gpt-neox, DeepSpeed's own pipeline models);
    one that imports Lightning in a file that uses DeepSpeed (`DeepSpeedStrategy`, a
    `"deepspeed_stage_2"` strategy, `import deepspeed`: the strategy calls `configure` with
    the section after `deepspeed.initialize`), or a `megatron` package it does not hold in
    such a file (Megatron-DeepSpeed's, which configures it; NVIDIA's Megatron imported where
    DeepSpeed is not used, as LLaMA-Factory's Megatron bridge does, counts for nothing); a
    config built by assignments (`config["activation_checkpointing"] = {...}`), which is not
    followed; a section whose settings are
    all DeepSpeed's defaults (false, `number_checkpoints: null`: it asks for nothing, so
    nothing is lost); an `activation_checkpointing` key outside a DeepSpeed config (FSDP's
    `fsdp_config: {activation_checkpointing: true}`); a project with no Python code that
    hands configs on (who reads the file is unknown).

    ## Why is this bad?
    `deepspeed.initialize` parses the section and never uses it: only
    `deepspeed.checkpointing.configure(mpu, deepspeed_config=...)` copies it into the
    settings that DeepSpeed's own `deepspeed.checkpointing.checkpoint` consults. A model
    checkpointed with torch's checkpoint or Hugging Face gradient checkpointing, or not
    checkpointed at all, runs as if the section were absent: activations are not
    partitioned nor moved to the CPU, and the memory stays the same (DeepSpeed issue 5704:
    "The memory remains the same. It doesn't work!"; 522, 3652, 3779; transformers issue
    22099: the Hugging Face integration does not use DeepSpeed's activation-checkpointing
    API).

    ## Example
    ```json
    {
      "train_micro_batch_size_per_gpu": "auto",
      "zero_optimization": {"stage": 3},
      "activation_checkpointing": {"partition_activations": true, "cpu_checkpointing": true}
    }
    ```
    with `TrainingArguments(deepspeed="ds_config.json")`.

    ## Use instead
    For a Hugging Face model, drop the section and turn on gradient checkpointing
    (`TrainingArguments(gradient_checkpointing=True)` or `model.gradient_checkpointing_enable()`);
    for another model, torch's `checkpoint(..., use_reentrant=False)`. To keep DeepSpeed's
    settings, configure them and checkpoint through DeepSpeed's function:
    ```python
    deepspeed.checkpointing.configure(None, deepspeed_config="ds_config.json")
    hidden = deepspeed.checkpointing.checkpoint(layer, hidden)
    ```

    ## Fix safety
    No fix: what to checkpoint, and with which implementation, is the project's choice.

    ## Evidence
    deepspeed 0.19.8, torch 2.13.0+cpu, `DS_ACCELERATOR=cpu` (`CPU_Accelerator`), one
    process (a script of our own, not kept in the repository): a config with
    `train_micro_batch_size_per_gpu`, `zero_optimization: {stage: 0}` and
    `activation_checkpointing: {partition_activations: true, cpu_checkpointing: true,
    number_checkpoints: 4, synchronize_checkpoint_boundary: true, profile: true}` given to
    `deepspeed.initialize(config=...)`: the engine holds the section
    (`engine._config.activation_checkpointing_config`) but
    `deepspeed.checkpointing.is_configured()` is False and the module's settings keep their
    defaults (`PARTITION_ACTIVATIONS`, `CPU_CHECKPOINT`, `SYNCHRONIZE`, `PROFILE_TIME` False,
    `num_layers` None), also after a training step through `deepspeed.checkpointing.checkpoint`
    (no timer created: `profile` not applied). After `deepspeed.checkpointing.configure(None,
    deepspeed_config=cfg)`: `is_configured()` True, every setting as written, and the next
    step logs `time (ms) | fwd: ...` / `backward: ...` (the profile applied). Source:
    `runtime/engine.py` never reads `activation_checkpointing_config`; it is read only by
    `_configure_using_config_file` (`activation_checkpointing/checkpointing.py:1132`), called
    from `configure`. `cpu_checkpointing` applies without `partition_activations`
    (`checkpointing.py:613`; measured: `configure` with `{cpu_checkpointing: true}` alone sets
    `CPU_CHECKPOINT` True, `PARTITION_ACTIVATIONS` False). transformers 5.17.0 and accelerate
    1.15.0 never name `deepspeed.checkpointing` (their sources grepped); Lightning's
    `DeepSpeedStrategy._set_deepspeed_activation_checkpointing` calls `configure` with the
    section.
    """

    code = "CKPT008"
    severity = Severity.WARNING
    name = "deepspeed-activation-checkpointing-config-unused"
    message = "a DeepSpeed `activation_checkpointing` section that nothing in the project applies"
    triggers = (b"activation_checkpointing",)
    uses_project = True

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        return project.deepspeed_section_unused

    def __init__(self, context) -> None:
        super().__init__(context)
        self._sections: list[tuple[cst.CSTNode, dict[str, object]]] = []

    def visit_Dict(self, node: cst.Dict) -> None:
        entries: dict[str, object] = {}
        anchor = None
        for element in node.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                continue
            key = element.key.evaluated_value
            if not isinstance(key, str):
                continue
            entries[key] = element.value
            if key == ACTIVATION_CHECKPOINTING_SECTION:
                anchor = element.key
        if anchor is not None:
            self._sections.append((anchor, entries))

    def visit_Call(self, node: cst.Call) -> None:
        # `dict(train_batch_size=..., activation_checkpointing=dict(...))`
        if not (isinstance(node.func, cst.Name) and node.func.value == "dict"):
            return
        entries = {arg.keyword.value: arg.value for arg in node.args if arg.keyword is not None}
        if ACTIVATION_CHECKPOINTING_SECTION in entries:
            anchor = next(arg.keyword for arg in node.args if arg.keyword is not None
                          and arg.keyword.value == ACTIVATION_CHECKPOINTING_SECTION)
            self._sections.append((anchor, entries))

    def finish(self) -> None:
        for anchor, entries in self._sections:
            if not is_deepspeed_config(entries, lambda value: _mapping(value) is not None):
                continue
            section = _mapping(entries[ACTIVATION_CHECKPOINTING_SECTION])
            if section is None:
                continue
            asked = requested_activation_checkpointing({k: _literal(v) for k, v in section.items()}, _UNKNOWN)
            if asked:
                self.report(anchor, unused_section_message(asked))


def _mapping(value) -> dict | None:
    """A dict literal's or `dict(...)` call's string keys and values; None for anything else."""
    if isinstance(value, cst.Dict):
        found = {}
        for element in value.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                return None  # a `**splat` or a computed key: not known
            found[element.key.evaluated_value] = element.value
        return found
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == "dict":
        if any(arg.keyword is None for arg in value.args):
            return None
        return {arg.keyword.value: arg.value for arg in value.args}
    return None


def _literal(value):
    if isinstance(value, cst.Name) and value.value in _LITERALS:
        return _LITERALS[value.value]
    if isinstance(value, cst.Integer):
        return int(value.evaluated_value)
    if isinstance(value, cst.SimpleString):
        return value.evaluated_value
    return _UNKNOWN
