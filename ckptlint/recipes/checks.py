"""The FSDP and Hugging Face rules applied to a training setup read from recipes.

At most one finding per setup, the most specific: CKPT005 (checkpointed twice) over CKPT004
(HF checkpointing with parameters resharded) over CKPT002 (reentrant under FSDP), as at a
Python call.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ckptlint.model.syntax.recipe_documents import Setting
from ckptlint.model.library.torch import NESTING_SUPPORTED, Reentrancy
from ckptlint.model.library.transformers import GC_OUTSIDE_FSDP_UNIT_VERSIONS, REENTRANT_DEFAULT_VERSIONS
from ckptlint.recipes.setups import Flavor, TrainingSetup
from ckptlint.versions import Applies, TargetVersions

# CKPT006's evidence (torch 2.13, gloo, 2 processes; transformers 5.17's Trainer alike).
DDP_UNUSED_CRASH = (
    "the first backward raises `RuntimeError: Expected to mark a variable ready only once` (DDP marks the "
    "checkpointed layers' parameters unused after the forward, and the reentrant recomputation fires their hooks again)"
)

# What reentrant checkpointing costs under FSDP1, measured on torch 2.13 (CPU, gloo, 2 ranks);
# FSDP2 showed neither (CKPT002's Evidence), so an FSDP2 recipe is not reported.
FSDP_REDUNDANT_ALL_GATHER = (
    "under FSDP1 the recomputation all-gathers every unit it covers a second time in backward, "
    "and several reentrant regions in one FSDP1 unit crash backward"
)
# transformers >= 4.52 checkpoints each decoder layer inside its own unit (GC_OUTSIDE_FSDP_UNIT_VERSIONS).
FSDP_REGIONS_IN_ONE_UNIT = (
    "under FSDP1 several reentrant regions in one unit crash backward (a unit holding more than one "
    "checkpointed layer, as a wrap without an auto-wrap policy makes)"
)


@dataclass(frozen=True)
class RecipeFinding:
    code: str
    message: str
    # The settings the finding rests on, the first being where it is reported.
    settings: tuple[Setting, ...]
    # A fix: (setting whose value is replaced, new value text) or (setting after whose line
    # a new line is inserted, the line's text without indentation).
    replace_value: tuple[Setting, str] | None = None
    insert_after: tuple[Setting, str] | None = None
    fix_message: str | None = None


def _said(setting: Setting | None, here: str) -> str:
    value = setting.value
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, list):
        text = " ".join(str(item) for item in value)
    else:
        text = str(value)
    where = f"line {setting.key_span.start.row}" if setting.path == here else setting.where
    return f"`{setting.dotted}: {text}`, {where}"


def check_setup(
    setup: TrainingSetup, versions: TargetVersions, enabled: frozenset[str], here: str
) -> RecipeFinding | None:
    """The finding for a setup, reported in the file `here` (settings of other files are
    named with their path)."""
    checkpointing, fsdp = setup.checkpointing, setup.fsdp
    if checkpointing is None:
        return None
    if checkpointing.setting is not None:
        gc = _said(checkpointing.setting, here)
    else:
        gc = f"on by default in {checkpointing.flavor.value}"
    if fsdp is None:
        return _ddp_unused_finding(setup, gc, enabled, here)
    fsdp_said = f"{fsdp.sharding.value}{' (FSDP2)' if fsdp.version == 2 else ''} ({_said(fsdp.setting, here)})"
    turn_off = (
        "`disable_gradient_checkpointing: true`"
        if checkpointing.flavor is Flavor.LLAMA_FACTORY
        else "`gradient_checkpointing: false`"
    )
    anchor = checkpointing.setting or checkpointing.kwargs or fsdp.setting
    involved = tuple(s for s in (anchor, checkpointing.kwargs, fsdp.setting, fsdp.activation_checkpointing) if s)
    reentrant = checkpointing.reentrancy.is_reentrant

    if fsdp.activation_checkpointing is not None and "CKPT005" in enabled:
        # transformers' Trainer raises when both are on, FSDP's from `TrainingArguments.fsdp_config`
        # or from accelerate's FSDP plugin (trainer.py, 4.46.3 line 4982).
        trainer_refuses = checkpointing.flavor in (Flavor.TRAINING_ARGUMENTS, Flavor.TRL)
        if trainer_refuses or reentrant or versions.applies((NESTING_SUPPORTED,)) is not Applies.NO:
            outcome = (
                "transformers' Trainer refuses to start with both (a loop of your own runs each layer's forward "
                "three times per step)"
                if trainer_refuses
                else "each layer's forward runs three times per step instead of two, for no memory saved"
            )
            return RecipeFinding(
                "CKPT005",
                f"layers checkpointed twice: Hugging Face gradient checkpointing ({gc}) and FSDP's activation "
                f"checkpointing ({_said(fsdp.activation_checkpointing, here)}): {outcome}; keep FSDP's and set "
                f"{turn_off}",
                involved,
            )
        return None
    # FSDP2 unshards in its pre-backward hook and skips the unshard of a recomputed forward
    # (`FSDPState._pre_forward` in PRE_BACKWARD): the redundant all-gather is FSDP1's.
    # A non-reentrant recomputation runs inside the unit's backward, after FSDP1's pre-backward
    # all-gather: no all-gather is added (EVIDENCE Q5; `ckptlint verify` on torch 2.13, 2 ranks:
    # 4 backward all-gathers with and without a non-reentrant checkpoint around each unit).
    # From transformers 4.52 the decoder layer checkpoints inside its own FSDP unit
    # (`GradientCheckpointingLayer`): no all-gather is added (`GC_OUTSIDE_FSDP_UNIT_VERSIONS`).
    outside_unit = versions.applies((GC_OUTSIDE_FSDP_UNIT_VERSIONS,))
    if (
        fsdp.sharding.reshards_parameters
        and fsdp.version == 1
        and fsdp.activation_checkpointing is None
        and checkpointing.reentrancy is not Reentrancy.EXPLICIT_FALSE
        and outside_unit is not Applies.NO
        and "CKPT004" in enabled
    ):
        unknown = f" (affects {GC_OUTSIDE_FSDP_UNIT_VERSIONS}; target version unknown)" if outside_unit is Applies.UNKNOWN else ""
        return RecipeFinding(
            "CKPT004",
            f"Hugging Face gradient checkpointing ({gc}) with FSDP {fsdp_said}: before transformers 4.52 it "
            f"recomputes each layer outside its FSDP unit, all-gathering its parameters again in backward; set "
            f"{turn_off} and use FSDP's activation checkpointing (`fsdp_config: {{activation_checkpointing: true}}`, "
            "or accelerate's `fsdp_activation_checkpointing: true`)" + unknown,
            involved,
        )
    if not reentrant or "CKPT002" not in enabled or fsdp.activation_checkpointing is not None or fsdp.version == 2:
        return None
    why = FSDP_REDUNDANT_ALL_GATHER
    if outside_unit is Applies.NO:
        # A unit per decoder layer, each checkpointing inside its own: nothing measured. An
        # accelerate config says so with `fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP`; a
        # Trainer's `fsdp` auto-wraps the layers when it says `auto_wrap`, and on transformers
        # 5 always (`auto_wrap_policy` defaults to TRANSFORMER_BASED_WRAP, training_args.py 5.17).
        trainer_fsdp = fsdp.setting is not None and fsdp.setting.dotted == "fsdp"
        if _auto_wraps(fsdp.setting) or fsdp.layer_units or (trainer_fsdp and versions.applies((REENTRANT_DEFAULT_VERSIONS,)) is Applies.NO):
            return None
        why = FSDP_REGIONS_IN_ONE_UNIT
    note = (
        f" (affects {REENTRANT_DEFAULT_VERSIONS}; target version unknown)"
        if checkpointing.version_dependent is Applies.UNKNOWN
        else ""
    )
    finding = RecipeFinding(
        "CKPT002",
        f"Hugging Face gradient checkpointing runs reentrant ({gc}; {checkpointing.why}) under FSDP "
        f"{fsdp_said}: {why}; set "
        + ("`use_reentrant_gc: false`" if checkpointing.flavor is Flavor.LLAMA_FACTORY else "`use_reentrant: false`")
        + note,
        involved,
        fix_message="Make gradient checkpointing non-reentrant",
    )
    return _with_non_reentrant_fix(finding, checkpointing)


def _ddp_unused_finding(setup: TrainingSetup, gc: str, enabled: frozenset[str], here: str) -> RecipeFinding | None:
    """CKPT006: reentrant Hugging Face checkpointing with `ddp_find_unused_parameters: true`
    (the first backward raises under torch DDP). Only where the version makes it reentrant."""
    checkpointing, unused = setup.checkpointing, setup.ddp_find_unused
    if (
        checkpointing is None or unused is None or "CKPT006" not in enabled
        or not checkpointing.reentrancy.is_reentrant or checkpointing.version_dependent is not Applies.YES
    ):
        return None
    anchor = checkpointing.setting or checkpointing.kwargs or unused
    involved = tuple(s for s in (anchor, checkpointing.kwargs, unused) if s)
    finding = RecipeFinding(
        "CKPT006",
        f"Hugging Face gradient checkpointing runs reentrant ({gc}; {checkpointing.why}) with "
        f"DDP's unused-parameter detection ({_said(unused, here)}): {DDP_UNUSED_CRASH}; set "
        + ("`use_reentrant_gc: false`" if checkpointing.flavor is Flavor.LLAMA_FACTORY else "`use_reentrant: false`"),
        involved,
        fix_message="Make gradient checkpointing non-reentrant",
    )
    return _with_non_reentrant_fix(finding, checkpointing)


def _with_non_reentrant_fix(finding: RecipeFinding, checkpointing) -> RecipeFinding:
    flag = checkpointing.flag
    if flag is not None and flag.plain_scalar and checkpointing.reentrancy is Reentrancy.EXPLICIT_TRUE:
        return replace(finding, replace_value=(flag, "false"))
    setting = checkpointing.setting
    if checkpointing.kwargs is None and checkpointing.fix_line and setting is not None and setting.plain_scalar:
        return replace(finding, insert_after=(setting, checkpointing.fix_line))
    return finding


def _auto_wraps(setting: Setting | None) -> bool:
    """A Trainer recipe's `fsdp: full_shard auto_wrap` (or a list naming `auto_wrap`)."""
    if setting is None:
        return False
    value = setting.value
    words = value if isinstance(value, list) else str(value).split()
    return any(str(word).lower() == "auto_wrap" for word in words)
