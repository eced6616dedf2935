"""What a recipe (or a launch command with its recipe files) sets up: whether Hugging Face
gradient checkpointing is on and with which implementation, whether the model is sharded
with FSDP and how, and whether FSDP applies its own activation checkpointing, each with the
setting that says so.

Sources and their defaults (read from each project's source; see the rules' Evidence):

- `TrainingArguments` / TRL configs (`gradient_checkpointing`, `gradient_checkpointing_kwargs`,
  `fsdp`, `fsdp_config`): checkpointing off by default; kwargs `None` -> transformers'
  default (reentrant before 5.0). `fsdp_config` keys may carry an `fsdp_` prefix
  (transformers strips it).
- accelerate config files (`distributed_type: FSDP`, `fsdp_config.fsdp_*`) and the same
  options of `accelerate launch`; FSDP's activation checkpointing is accelerate's
  `checkpoint_wrapper` with `CheckpointImpl.NO_REENTRANT`.
- LLaMA-Factory (`llamafactory.hparams.ModelArguments`): gradient checkpointing on unless
  `disable_gradient_checkpointing: true`, with `{"use_reentrant": use_reentrant_gc}`,
  `use_reentrant_gc` defaulting to True (forced False under FSDP2).
- axolotl: the TrainingArguments keys, `fsdp` / `fsdp_config` as in TrainingArguments;
  `normalize_config` sets `gradient_checkpointing_kwargs = {"use_reentrant": True}` when
  checkpointing is on without kwargs (unless `rl` or `unfrozen_parameters` is set), and
  `gradient_checkpointing: offload` means on. `activation_offloading` (axolotl >= 0.12.0, where
  it first appears) other than `hidden_states` turns Hugging Face checkpointing off: the trainer
  builder passes `gradient_checkpointing=False` (`core/builders/base.py`,
  `_configure_gradient_checkpointing`: "TRL offloader replaces HF recompute") and a full
  fine-tune is checkpointed by `apply_activation_checkpointing` with torch's non-reentrant
  `checkpoint_wrapper` (`loaders/model.py`, `ac_wrap_hf_model`); `hidden_states` keeps it on
  with the recipe's kwargs. The FSDP version may also be written inside `fsdp_config`
  (`fsdp_version` or `version`; `check_fsdp_version_in_fsdp_config` moves it up).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass

from ckptlint.model.library.fsdp_settings import (
    Fsdp, accelerate_fsdp, axolotl_fsdp, enabled_setting, fsdp_key, is_accelerate_config, training_arguments_fsdp,
)
from ckptlint.model.library.transformers import TRAINER_OWN_KEYS, KwargsShape
from ckptlint.model.syntax.launch_commands import hf_bool
from ckptlint.model.library.torch import Reentrancy
from ckptlint.model.library.transformers import REENTRANT_DEFAULT_VERSIONS
from ckptlint.model.library.trl import TRL_CHECKPOINTING_DEFAULT, TRL_NON_REENTRANT_DEFAULT
from ckptlint.model.syntax.recipe_documents import Setting, Settings
from ckptlint.versions import Applies, TargetVersions


class Flavor(str, enum.Enum):
    """Whose arguments a recipe holds (their defaults differ)."""

    TRAINING_ARGUMENTS = "TrainingArguments"
    LLAMA_FACTORY = "LLaMA-Factory"
    AXOLOTL = "axolotl"
    TRL = "TRL"


@dataclass(frozen=True)
class Checkpointing:
    """Hugging Face gradient checkpointing that is on: the setting turning it on (None: on
    by default for the flavor), and the implementation it runs."""

    setting: Setting | None
    reentrancy: Reentrancy
    # Whether `reentrancy` depends on a transformers version the configuration does not pin.
    version_dependent: Applies
    why: str  # what makes it reentrant (for messages)
    kwargs: Setting | None  # the setting that decides the implementation, when one is written
    flavor: Flavor
    # The plain `use_reentrant` (or `use_reentrant_gc`) value a fix may edit.
    flag: Setting | None = None
    # The line that, added after `setting`, makes it non-reentrant (when `kwargs` is None).
    fix_line: str | None = None


@dataclass(frozen=True)
class TrainingSetup:
    checkpointing: Checkpointing | None
    fsdp: Fsdp | None
    # `ddp_find_unused_parameters: true` where the Trainer builds torch DDP (no DeepSpeed, no
    # `ddp_static_graph: true`; FSDP is `fsdp`'s): CKPT006.
    ddp_find_unused: Setting | None = None


def flavor_of(arguments: Settings, hint: Flavor | None = None) -> Flavor:
    if hint is not None:
        return hint
    keys = {key[0] for key in arguments}
    if keys & {"disable_gradient_checkpointing", "use_reentrant_gc", "finetuning_type"} or {
        "stage", "template"
    } <= keys:
        return Flavor.LLAMA_FACTORY
    if "base_model" in keys and keys & {"micro_batch_size", "datasets", "sequence_len", "adapter", "fsdp_version"}:
        return Flavor.AXOLOTL
    return Flavor.TRAINING_ARGUMENTS


def _kwargs_shape(value: object) -> tuple[KwargsShape, Reentrancy]:
    """`gradient_checkpointing_kwargs` as written in a recipe (a mapping, or a JSON string:
    `TrainingArguments.__post_init__` parses those for its dict fields), on the Trainer's
    path."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except ValueError:
            return KwargsShape.UNKNOWN, Reentrancy.UNKNOWN
    if value is None:
        return KwargsShape.DEFAULT, Reentrancy.UNKNOWN
    if not isinstance(value, dict):
        return KwargsShape.UNKNOWN, Reentrancy.UNKNOWN
    if "use_reentrant" in value:
        flag = hf_bool(value["use_reentrant"])
        reentrancy = Reentrancy.UNKNOWN if flag is None else Reentrancy.EXPLICIT_TRUE if flag else Reentrancy.EXPLICIT_FALSE
        return KwargsShape.WITH_FLAG, reentrancy
    if set(value) <= TRAINER_OWN_KEYS:
        return KwargsShape.UNKNOWN, Reentrancy.UNKNOWN
    return KwargsShape.WITHOUT_FLAG, Reentrancy.IMPLICIT


def checkpointing_of(
    arguments: Settings,
    versions: TargetVersions,
    flavor: Flavor,
    reentrant_field: tuple[str, bool] | None = None,
    command: str | None = None,
) -> Checkpointing | None:
    """The Hugging Face gradient checkpointing the arguments turn on. `reentrant_field`:
    (name, default) of an entry point's own argument that becomes `use_reentrant`."""
    if flavor is Flavor.LLAMA_FACTORY:
        disabled = arguments.get(("disable_gradient_checkpointing",))
        if disabled is not None and hf_bool(disabled.value) is not False:
            return None
        field = arguments.get(("use_reentrant_gc",))
        flag = hf_bool(field.value) if field is not None else True
        if flag is None:
            return None
        reentrancy = Reentrancy.EXPLICIT_TRUE if flag else Reentrancy.EXPLICIT_FALSE
        why = "`use_reentrant_gc: true`" if field is not None else "LLaMA-Factory's default `use_reentrant_gc: true`"
        return Checkpointing(disabled, reentrancy, Applies.YES, why, field, flavor, field, "use_reentrant_gc: false")

    setting = arguments.get(("gradient_checkpointing",))
    if setting is None and flavor is Flavor.TRL and versions.applies((TRL_CHECKPOINTING_DEFAULT,)) is Applies.YES:
        return _trl_default(arguments, versions, command)
    if setting is None:
        return None
    on = hf_bool(setting.value)
    if on is None and not (flavor is Flavor.AXOLOTL and isinstance(setting.value, str)):
        return None  # a value not known here
    if on is False:
        return None
    kwargs = arguments.get(("gradient_checkpointing_kwargs",))
    if reentrant_field is not None and kwargs is None:
        name, default = reentrant_field
        field = arguments.get((name,))
        flag = hf_bool(field.value) if field is not None else default
        if flag is None:
            return None
        reentrancy = Reentrancy.EXPLICIT_TRUE if flag else Reentrancy.EXPLICIT_FALSE
        why = f"`{name}: {str(flag).lower()}`" + ("" if field is not None else " (the entry point's default)")
        return Checkpointing(setting, reentrancy, Applies.YES, why, field, flavor, field, f"{name}: false")
    if flavor is Flavor.AXOLOTL and not _axolotl_keeps_hf_checkpointing(arguments.get(("activation_offloading",))):
        return None  # activation offloading in its place (or a value not known here)
    if flavor is Flavor.AXOLOTL and kwargs is None:
        if {("rl",), ("unfrozen_parameters",)} & set(arguments):
            # Left unset by `normalize_config`; axolotl's trainer builder then passes
            # `{"use_reentrant": False}`.
            return Checkpointing(setting, Reentrancy.EXPLICIT_FALSE, Applies.YES, "", None, flavor)
        # axolotl's `normalize_config` sets `{"use_reentrant": True}` for unset kwargs.
        why = "axolotl's default `gradient_checkpointing_kwargs: {use_reentrant: true}`"
        fix_line = "gradient_checkpointing_kwargs: {use_reentrant: false}"
        return Checkpointing(setting, Reentrancy.EXPLICIT_TRUE, Applies.YES, why, None, flavor, None, fix_line)
    shape, reentrancy = _kwargs_shape(kwargs.value if kwargs is not None else None)
    if shape in (KwargsShape.DEFAULT, KwargsShape.WITHOUT_FLAG) and _trl_sets_non_reentrant(flavor, command, versions):
        return Checkpointing(setting, Reentrancy.EXPLICIT_FALSE, Applies.YES, "", None, flavor)
    if shape is KwargsShape.DEFAULT:
        applies = versions.applies((REENTRANT_DEFAULT_VERSIONS,))
        reentrancy = Reentrancy.EXPLICIT_FALSE if applies is Applies.NO else Reentrancy.EXPLICIT_TRUE
        why = "transformers < 5.0 defaults to `use_reentrant=True`"
        fix_line = "gradient_checkpointing_kwargs: {use_reentrant: false}"
        return Checkpointing(setting, reentrancy, applies, why, None, flavor, None, fix_line)
    why = {
        KwargsShape.WITH_FLAG: "`use_reentrant: true`",
        KwargsShape.WITHOUT_FLAG: "a kwargs mapping without `use_reentrant` replaces transformers' default, so "
        "torch's reentrant default applies",
    }.get(shape, "")
    flag = arguments.get(("gradient_checkpointing_kwargs", "use_reentrant"))
    return Checkpointing(setting, reentrancy, Applies.YES, why, kwargs, flavor, flag)


def _axolotl_keeps_hf_checkpointing(offloading: Setting | None) -> bool:
    """Whether axolotl's `activation_offloading` leaves Hugging Face gradient checkpointing
    on: unset, false, or `hidden_states` (axolotl's builder turns it off for every other mode)."""
    if offloading is None or offloading.value is None or hf_bool(offloading.value) is False:
        return True
    return isinstance(offloading.value, str) and offloading.value.strip().lower() == "hidden_states"


def _trl_sets_non_reentrant(flavor: Flavor | None, command: str | None, versions: TargetVersions) -> bool:
    """A TRL command (`trl sft`, `trl dpo`, ...: a TRL config handed to a TRL trainer) on a
    TRL that sets `use_reentrant=False` itself where the user's kwargs leave it out."""
    return flavor is Flavor.TRL and command is not None and versions.applies((TRL_NON_REENTRANT_DEFAULT,)) is Applies.YES


def _trl_default(arguments: Settings, versions: TargetVersions, command: str | None) -> Checkpointing | None:
    """TRL (>= 0.22) with `gradient_checkpointing` not written: on."""
    kwargs = arguments.get(("gradient_checkpointing_kwargs",))
    if kwargs is not None:
        shape, reentrancy = _kwargs_shape(kwargs.value)
        if reentrancy is Reentrancy.UNKNOWN:
            return None
        if shape is KwargsShape.WITHOUT_FLAG and _trl_sets_non_reentrant(Flavor.TRL, command, versions):
            return Checkpointing(None, Reentrancy.EXPLICIT_FALSE, Applies.YES, "", None, Flavor.TRL)
        flag = arguments.get(("gradient_checkpointing_kwargs", "use_reentrant"))
        return Checkpointing(None, reentrancy, Applies.YES, "`use_reentrant: true`", kwargs, Flavor.TRL, flag)
    if _trl_sets_non_reentrant(Flavor.TRL, command, versions):
        return Checkpointing(None, Reentrancy.EXPLICIT_FALSE, Applies.YES, "", None, Flavor.TRL)
    applies = versions.applies((REENTRANT_DEFAULT_VERSIONS,))
    reentrancy = Reentrancy.EXPLICIT_FALSE if applies is Applies.NO else Reentrancy.EXPLICIT_TRUE
    why = "transformers < 5.0 defaults to `use_reentrant=True`"
    return Checkpointing(None, reentrancy, applies, why, None, Flavor.TRL)


def setup_of(
    arguments: Settings,
    launch_config: Settings,
    versions: TargetVersions,
    *,
    flavor: Flavor | None = None,
    reentrant_field: tuple[str, bool] | None = None,
    command: str | None = None,
) -> TrainingSetup:
    """The setup from a program's arguments and the launcher's configuration (an accelerate
    config with `accelerate launch` options folded in)."""
    flavor = flavor_of(arguments, flavor)
    fsdp = training_arguments_fsdp(arguments)
    if fsdp is None and flavor is Flavor.AXOLOTL:
        fsdp = axolotl_fsdp(arguments)
    if fsdp is None:
        fsdp = accelerate_fsdp(launch_config) or (accelerate_fsdp(arguments) if is_accelerate_config(arguments) else None)
        written = fsdp_key(arguments, ("fsdp_config",), "activation_checkpointing")
        if fsdp is not None and written is not None and flavor in (Flavor.TRAINING_ARGUMENTS, Flavor.TRL):
            # The Trainer overrides the plugin's value with `fsdp_config`'s.
            fsdp = dataclasses.replace(fsdp, activation_checkpointing=enabled_setting(written))
    checkpointing = checkpointing_of(arguments, versions, flavor, reentrant_field, command)
    if (
        checkpointing is not None
        and flavor is Flavor.LLAMA_FACTORY
        and fsdp is not None
        and fsdp.version == 2
        and checkpointing.reentrancy is Reentrancy.EXPLICIT_TRUE
    ):
        # LLaMA-Factory turns `use_reentrant_gc` off itself under FSDP2.
        checkpointing = dataclasses.replace(checkpointing, reentrancy=Reentrancy.EXPLICIT_FALSE)
    return TrainingSetup(checkpointing, fsdp, _ddp_find_unused(arguments, launch_config))


def _ddp_find_unused(arguments: Settings, launch_config: Settings) -> Setting | None:
    """`ddp_find_unused_parameters: true` (`TrainingArguments`' field, handed to torch's DDP as
    `find_unused_parameters`), unless DeepSpeed runs instead (`deepspeed:` set, an accelerate
    config's `distributed_type: DEEPSPEED`) or `ddp_static_graph: true` makes it harmless."""
    setting = arguments.get(("ddp_find_unused_parameters",))
    if setting is None or hf_bool(setting.value) is not True:
        return None
    deepspeed = arguments.get(("deepspeed",))
    if deepspeed is not None and deepspeed.value not in (None, "", False) and hf_bool(deepspeed.value) is not False:
        return None
    distributed = launch_config.get(("distributed_type",))
    if distributed is not None and str(distributed.value).upper() == "DEEPSPEED":
        return None
    static = arguments.get(("ddp_static_graph",))
    if static is not None and hf_bool(static.value) is True:
        return None
    return setting
