"""What CKPT002's messages say of the harm, and the message for Hugging Face checkpointing."""

from __future__ import annotations

from ckptlint.model.library.transformers import HfCheckpointingKwargs, KwargsShape

WHY = (
    "under FSDP1 the recomputation all-gathers every unit it covers a second time in backward, "
    "several reentrant regions in one FSDP unit crash backward, and FSDP2 leaks memory"
)


def hf_message(what: str, kwargs: HfCheckpointingKwargs, fsdp: str) -> str:
    """Hugging Face checkpointing that runs reentrant under FSDP (`fsdp`: the use found)."""
    why = {
        KwargsShape.DEFAULT: "transformers < 5.0 defaults to `use_reentrant=True`",
        KwargsShape.WITHOUT_FLAG: "a kwargs dict without `use_reentrant` replaces transformers' default, "
        "so torch's reentrant default applies",
        KwargsShape.WITH_FLAG: "`use_reentrant: True`",
    }[kwargs.shape]
    return (
        f"Hugging Face gradient checkpointing runs reentrant here ({what}: {why}) in a project that uses "
        f'FSDP ({fsdp}): {WHY}; pass `gradient_checkpointing_kwargs={{"use_reentrant": False}}`'
    )
