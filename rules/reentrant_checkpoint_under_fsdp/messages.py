"""What CKPT002's messages say of the harm, and the message for Hugging Face checkpointing.

Only what is measured for FSDP1 on torch 2.13 (CPU, gloo, 2 ranks; the rule's Evidence):
FSDP2 (`fully_shard`) showed no harm, so the rule is not reported where only FSDP2 reaches
the code, and its messages make no FSDP2 claim."""

from __future__ import annotations

from ckptlint.model.library.transformers import GC_OUTSIDE_FSDP_UNIT_VERSIONS, HfCheckpointingKwargs, KwargsShape
from ckptlint.versions import Applies, TargetVersions

WHY = (
    "under FSDP1 the recomputation all-gathers every unit it covers a second time in backward, "
    "and several reentrant regions in one FSDP1 unit crash backward"
)
# transformers >= 4.52: each decoder layer checkpoints inside its own FSDP unit
# (`GradientCheckpointingLayer`), so a unit per layer adds no all-gather; a unit holding
# several layers (a wrap without an auto-wrap policy) still crashes (measured on 5.17 and 4.53).
WHY_INSIDE_UNITS = (
    "under FSDP1 several reentrant regions in one unit crash backward (a unit holding more than one "
    "checkpointed layer, as a wrap without an auto-wrap policy makes)"
)


def hf_why(versions: TargetVersions) -> str:
    """The harm of reentrant Hugging Face checkpointing under FSDP1 for the targeted transformers."""
    return WHY_INSIDE_UNITS if versions.applies((GC_OUTSIDE_FSDP_UNIT_VERSIONS,)) is Applies.NO else WHY


def hf_message(what: str, kwargs: HfCheckpointingKwargs, fsdp: str, versions: TargetVersions) -> str:
    """Hugging Face checkpointing that runs reentrant under FSDP (`fsdp`: the use found)."""
    why = {
        KwargsShape.DEFAULT: "transformers < 5.0 defaults to `use_reentrant=True`",
        KwargsShape.WITHOUT_FLAG: "a kwargs dict without `use_reentrant` replaces transformers' default, "
        "so torch's reentrant default applies",
        KwargsShape.WITH_FLAG: "`use_reentrant: True`",
    }[kwargs.shape]
    return (
        f"Hugging Face gradient checkpointing runs reentrant here ({what}: {why}) in a project that uses "
        f'FSDP ({fsdp}): {hf_why(versions)}; pass `gradient_checkpointing_kwargs={{"use_reentrant": False}}`'
    )
