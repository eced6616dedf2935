"""TRL's behaviour as data: its trainers and configs, and the gradient-checkpointing
defaults they set by version."""

from __future__ import annotations

from ckptlint.versions import VersionRange

# TRL's configs turn gradient checkpointing on by default from 0.22 (SFTConfig; every
# trainer's config from 1.0).
TRL_CHECKPOINTING_DEFAULT = VersionRange.of("trl", min="0.22")
# TRL's trainers (`trl/__init__.py` of 0.28.0 exports these; GKD subclasses SFT, XPO and
# NashMD OnlineDPO, MiniLLM GRPO).
TRL_TRAINERS = frozenset(
    f"{name}Trainer"
    for name in ("SFT", "DPO", "GRPO", "Reward", "RLOO", "KTO", "BCO", "CPO", "ORPO", "PPO", "PRM",
                 "OnlineDPO", "GKD", "XPO", "NashMD", "MiniLLM", "TPO")
)
# TRL defaults Hugging Face checkpointing to non-reentrant where transformers does not
# (< 5.0): `args.gradient_checkpointing_kwargs = args.gradient_checkpointing_kwargs or {}`,
# then `.setdefault("use_reentrant", False)` (a `use_reentrant` the user gives stays). Read in
# trl's sources at each tag from v0.26.0 to v1.9.0: absent in 0.26 (but for GRPO and RLOO,
# which force True under PEFT + ZeRO-3); 0.27.x in every config's `__post_init__`
# (`SFTConfig`, `DPOConfig`, `GRPOConfig`, ... and their subclasses); from 0.28.0 in every
# trainer's `__init__` instead (`TRL_TRAINERS`), so a config alone no longer does it.
TRL_NON_REENTRANT_CONFIGS = VersionRange.of("trl", min="0.27.0", max="0.28.0")
TRL_NON_REENTRANT_TRAINERS = VersionRange.of("trl", min="0.28.0")
TRL_NON_REENTRANT_DEFAULT = VersionRange.of("trl", min="0.27.0")  # a TRL config handed to a TRL trainer


def is_trl_name(name: str, names: frozenset[str]) -> bool:
    """`trl.SFTTrainer`, `trl.trainer.sft_trainer.SFTTrainer`: a TRL class of `names`."""
    return name.startswith("trl.") and name.rsplit(".", 1)[-1] in names


# TRL's configs, which subclass transformers' `TrainingArguments`.
TRL_CONFIGS = frozenset(
    {
        "SFTConfig", "DPOConfig", "GRPOConfig", "RewardConfig", "ORPOConfig", "KTOConfig",
        "PPOConfig", "RLOOConfig", "CPOConfig", "BCOConfig", "GKDConfig", "PRMConfig",
        "OnlineDPOConfig", "XPOConfig", "NashMDConfig", "AlignPropConfig", "DDPOConfig",
    }
)
TRL_CONFIG_CLASSES = frozenset(f"trl.{name}" for name in TRL_CONFIGS)
