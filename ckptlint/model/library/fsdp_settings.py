"""Torch FSDP as a recipe turns it on: `TrainingArguments`' `fsdp` / `fsdp_config`, axolotl's
`fsdp_version` / `fsdp_config`, an accelerate config's `distributed_type: FSDP` (and the same
options of `accelerate launch`): how it shards, which FSDP version, and whether FSDP applies
its own activation checkpointing, each with the setting that says so. `fsdp_config` keys
may carry an `fsdp_` prefix (transformers and axolotl strip it; accelerate writes it). Read
by the recipe checks (`ckptlint.recipes.setups`) and by the index, for the FSDP use of the
files a launch runs under an accelerate config (`ckptlint.model.file_facts.launch_scripts`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ckptlint.model.syntax.launch_commands import hf_bool
from ckptlint.model.syntax.recipe_documents import Setting, Settings


class Sharding(str, enum.Enum):
    FULL = "full_shard"
    HYBRID = "hybrid_shard"
    GRAD_OP = "shard_grad_op"
    NONE = "no_shard"
    UNKNOWN = "unknown"

    @property
    def reshards_parameters(self) -> bool:
        """Parameters are freed after forward, so a recomputation all-gathers them again."""
        return self in (Sharding.FULL, Sharding.HYBRID)


_SHARDING_BY_NAME = {
    "full_shard": Sharding.FULL, "1": Sharding.FULL,
    "shard_grad_op": Sharding.GRAD_OP, "2": Sharding.GRAD_OP,
    "no_shard": Sharding.NONE, "3": Sharding.NONE,
    "hybrid_shard": Sharding.HYBRID, "4": Sharding.HYBRID,
    "hybrid_shard_zero2": Sharding.GRAD_OP, "_hybrid_shard_zero2": Sharding.GRAD_OP, "5": Sharding.GRAD_OP,
}  # fmt: skip


@dataclass(frozen=True)
class Fsdp:
    """Torch FSDP as a recipe turns it on."""

    setting: Setting  # what turns it on (`fsdp:`, `distributed_type: FSDP`, `--use_fsdp`)
    sharding: Sharding
    version: int  # 1 or 2
    activation_checkpointing: Setting | None  # FSDP's own activation checkpointing, when on
    # An accelerate config's `fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP`: a unit per layer.
    layer_units: bool = False


def is_accelerate_config(settings: Settings) -> bool:
    keys = {key[0] for key in settings}
    return "distributed_type" in keys or ("compute_environment" in keys and "num_processes" in keys)


def fsdp_key(settings: Settings, prefix: tuple[str, ...], name: str) -> Setting | None:
    """`fsdp_config.<name>`, also spelled with the `fsdp_` prefix (transformers and axolotl
    strip it; accelerate writes it)."""
    return settings.get(prefix + (f"fsdp_{name}",)) or settings.get(prefix + (name,))


def enabled_setting(setting: Setting | None) -> Setting | None:
    return setting if setting is not None and hf_bool(setting.value) else None


def training_arguments_fsdp(arguments: Settings) -> Fsdp | None:
    """FSDP from `fsdp: "full_shard auto_wrap"` (or a list) and `fsdp_config`."""
    setting = arguments.get(("fsdp",))
    if setting is None:
        return None
    value = setting.value
    words = value.split() if isinstance(value, str) else value if isinstance(value, list) else None
    if not words or not all(isinstance(word, str) for word in words):
        return None
    words = [word.lower() for word in words]
    sharding = next((_SHARDING_BY_NAME[w] for w in words if w in _SHARDING_BY_NAME), None)
    if sharding is None and not any(w in ("offload", "auto_wrap") for w in words):
        return None  # "" or unrelated words: FSDP off
    version_setting = fsdp_key(arguments, ("fsdp_config",), "version")
    version = 2 if version_setting is not None and str(version_setting.value) == "2" else 1
    checkpointing = enabled_setting(fsdp_key(arguments, ("fsdp_config",), "activation_checkpointing"))
    return Fsdp(setting, sharding or Sharding.FULL, version, checkpointing)


def axolotl_fsdp(arguments: Settings) -> Fsdp | None:
    """axolotl's current form: `fsdp_version: 2` and an `fsdp_config` mapping, without the
    deprecated `fsdp:` list (`reshard_after_forward` defaults to true)."""
    config = arguments.get(("fsdp_config",))
    version_setting = arguments.get(("fsdp_version",)) or fsdp_key(arguments, ("fsdp_config",), "version")
    if config is None or not isinstance(config.value, dict) or not config.value or version_setting is None:
        return None
    version = 2 if str(version_setting.value) == "2" else 1
    reshard = fsdp_key(arguments, ("fsdp_config",), "reshard_after_forward")
    flag = hf_bool(reshard.value) if reshard is not None else True
    sharding = Sharding.UNKNOWN if flag is None else Sharding.FULL if flag else Sharding.GRAD_OP
    checkpointing = enabled_setting(fsdp_key(arguments, ("fsdp_config",), "activation_checkpointing"))
    return Fsdp(version_setting, sharding, version, checkpointing)


def accelerate_fsdp(config: Settings) -> Fsdp | None:
    """FSDP from an accelerate config file (or `accelerate launch` options in its shape)."""
    setting = config.get(("distributed_type",))
    if setting is None or str(setting.value).upper() != "FSDP":
        return None
    prefix = ("fsdp_config",)
    version_setting = fsdp_key(config, prefix, "version")
    version = 2 if version_setting is not None and str(version_setting.value) == "2" else 1
    strategy = fsdp_key(config, prefix, "sharding_strategy")
    reshard = fsdp_key(config, prefix, "reshard_after_forward")
    sharding = Sharding.FULL  # accelerate's default for both versions
    if strategy is not None:
        sharding = _SHARDING_BY_NAME.get(str(strategy.value).lower(), Sharding.UNKNOWN)
    elif reshard is not None:
        value = reshard.value
        if isinstance(value, str) and value.lower() in _SHARDING_BY_NAME:  # FSDP1 spelling
            sharding = _SHARDING_BY_NAME[value.lower()]
        else:
            flag = hf_bool(value)
            sharding = Sharding.UNKNOWN if flag is None else Sharding.FULL if flag else Sharding.GRAD_OP
    checkpointing = enabled_setting(fsdp_key(config, prefix, "activation_checkpointing"))
    policy = fsdp_key(config, prefix, "auto_wrap_policy")
    layer_units = policy is not None and str(policy.value).upper() == "TRANSFORMER_BASED_WRAP"
    return Fsdp(setting, sharding, version, checkpointing, layer_units)
