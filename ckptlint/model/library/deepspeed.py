"""DeepSpeed's behaviour as data: its activation-checkpointing functions."""

from __future__ import annotations

from ckptlint.model.library.torch import CheckpointingHelper

# DeepSpeed's `checkpoint(function, *args)` and `non_reentrant_checkpoint(function, *args)`
# (0.16.4 `deepspeed/runtime/activation_checkpointing/checkpointing.py:948`, `:704`; the
# module is `deepspeed.checkpointing`) run `function` again in backward (`CheckpointFunction.
# backward`, line 654), with the RNG states of the forward restored: what it runs is recomputed,
# its randomness is not redrawn. Its own reentrancy is no torch `use_reentrant` question.
DEEPSPEED_CHECKPOINTING_HELPERS = {
    f"{module}.{function}": CheckpointingHelper(0)
    for module in ("deepspeed.checkpointing", "deepspeed.runtime.activation_checkpointing.checkpointing")
    for function in ("checkpoint", "non_reentrant_checkpoint")
}

# --- the `activation_checkpointing` section of a DeepSpeed config ------------------------
#
# Read by `deepspeed.checkpointing.configure(mpu, deepspeed_config=...)` alone
# (`_configure_using_config_file`, 0.19.8 `checkpointing.py:1132`), which sets the module's
# globals that DeepSpeed's own `checkpoint` / `non_reentrant_checkpoint` consult.
# `deepspeed.initialize` parses the section into `engine._config.activation_checkpointing_config`
# (`runtime/config.py:503`) and nothing reads it there: measured with deepspeed 0.19.8, torch
# 2.13 (CPU accelerator), after `deepspeed.initialize(config=...)` with every setting on,
# `deepspeed.checkpointing.is_configured()` is False and every global keeps its default;
# `configure(None, deepspeed_config=cfg)` turns them on. transformers 5.17 and accelerate
# 1.15 never call `configure` (no `deepspeed.checkpointing` in their sources); Lightning's
# `DeepSpeedStrategy` does (`_set_deepspeed_activation_checkpointing`, after
# `deepspeed.initialize`).
ACTIVATION_CHECKPOINTING_SECTION = "activation_checkpointing"
# Each setting and its default (`activation_checkpointing/config.py`, `ACT_CHKPT_DEFAULT`).
# `get_scalar_param` takes the value as written, and the globals are tested by truth
# (`if PARTITION_ACTIVATIONS:`): a value that is not false asks for the setting.
# `cpu_checkpointing` works without `partition_activations` (0.19.8 `checkpointing.py:613`,
# `elif CPU_CHECKPOINT and offload_engine is None`).
ACTIVATION_CHECKPOINTING_DEFAULTS: dict[str, object] = {
    "partition_activations": False,
    "cpu_checkpointing": False,
    "contiguous_memory_optimization": False,
    "number_checkpoints": None,
    "synchronize_checkpoint_boundary": False,
    "profile": False,
}
# Top-level keys only a DeepSpeed config holds (`runtime/constants.py`); `fp16` / `bf16` are
# DeepSpeed's when they hold a mapping (`{"enabled": true}`; a `TrainingArguments` file
# writes booleans).
DEEPSPEED_CONFIG_KEYS = frozenset({
    "zero_optimization", "train_batch_size", "train_micro_batch_size_per_gpu", "steps_per_print",
    "wall_clock_breakdown", "zero_allow_untested_optimizer", "zero_force_ds_cpu_optimizer", "gradient_clipping",
    "prescale_gradients", "gradient_predivide_factor", "flops_profiler", "comms_logger",
})
DEEPSPEED_PRECISION_SECTIONS = ("fp16", "bf16")

# What makes a project's DeepSpeed activation-checkpointing section live: the function that
# reads it, DeepSpeed's checkpoint functions (a project checkpointing through them wires
# DeepSpeed's checkpointing, Megatron-DeepSpeed and gpt-neox style), and `PipelineModule`,
# whose `activation_checkpoint_func` is DeepSpeed's checkpoint (`pipe/module.py`).
DEEPSPEED_CHECKPOINTING_WIRING = frozenset({
    f"{module}.{function}"
    for module in ("deepspeed.checkpointing", "deepspeed.runtime.activation_checkpointing.checkpointing")
    for function in ("configure", "checkpoint", "non_reentrant_checkpoint")
} | {
    f"deepspeed.{module}.PipelineModule" for module in ("pipe", "runtime.pipe", "runtime.pipe.module")
})
# Packages whose DeepSpeed integration calls `configure` itself: Lightning's DeepSpeedStrategy
# (pytorch_lightning, lightning, lightning_fabric), and Megatron-DeepSpeed's `megatron`
# (its `initialize.py` configures DeepSpeed's checkpointing when `--deepspeed-activation-checkpointing`),
# each counted where the importing file uses DeepSpeed (NVIDIA's `megatron` has no DeepSpeed).
CONFIGURING_PACKAGES = ("pytorch_lightning", "lightning", "lightning_fabric", "megatron")
# Packages that hand a DeepSpeed config to `deepspeed.initialize` and never call `configure`
# (transformers' Trainer and `HfDeepSpeedConfig`, accelerate's `DeepSpeedPlugin`, TRL's
# trainers, DeepSpeed itself).
NON_CONFIGURING_PACKAGES = ("deepspeed", "transformers", "accelerate", "trl")


def requested_activation_checkpointing(section: dict[str, object], unknown: object) -> tuple[str, ...]:
    """The settings of an `activation_checkpointing` section that ask for something other
    than DeepSpeed's default (a value `unknown`, not a literal, counts as asking), in
    DeepSpeed's order."""
    # Every default is false, and `number_checkpoints` counts only when true too (a `false`
    # or 0 there sizes no buffer): a false value asks for nothing.
    return tuple(
        name for name in ACTIVATION_CHECKPOINTING_DEFAULTS
        if name in section and (section[name] is unknown or bool(section[name]))
    )


def is_deepspeed_config(keys: dict[str, object], is_mapping) -> bool:
    """Whether a mapping with these top-level keys (key -> value) is a DeepSpeed config;
    `is_mapping(value)` says whether a value is itself a mapping."""
    return any(key in DEEPSPEED_CONFIG_KEYS for key in keys) or any(
        key in keys and is_mapping(keys[key]) for key in DEEPSPEED_PRECISION_SECTIONS
    )


def unused_section_message(asked: tuple[str, ...]) -> str:
    """CKPT008's message, for the settings a section asks for."""
    settings = ", ".join(f"`{name}`" for name in asked)
    return (
        f"DeepSpeed's `activation_checkpointing` section ({settings}) is never applied: only "
        "`deepspeed.checkpointing.configure(...)` reads it (not `deepspeed.initialize`), for DeepSpeed's own "
        "`deepspeed.checkpointing.checkpoint`, and the project calls neither; checkpoint a Hugging Face model with "
        "`model.gradient_checkpointing_enable()` (`gradient_checkpointing: true`), another with torch's `checkpoint`, "
        "and drop the section, or call `deepspeed.checkpointing.configure(None, deepspeed_config=...)` and "
        "checkpoint through `deepspeed.checkpointing.checkpoint`"
    )
