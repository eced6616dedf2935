"""The static rules the verifier's findings correspond to: each hazard it can measure, by
the rule's name, with the code read from the generated manifest (`ckptlint/rule_manifest.py`,
written from the rule classes by `python -m ckptlint.docs`). A rule renamed or removed
breaks this import, and tests/test_verify_scripts.py, instead of leaving a stale code."""

from __future__ import annotations

from ckptlint.rule_manifest import RULE_MANIFEST

_CODES = {rule.name: rule.code for rule in RULE_MANIFEST}

REENTRANT_UNDER_FSDP = _CODES["reentrant-checkpoint-under-fsdp"]  # CKPT002
CHECKPOINT_BEFORE_FSDP_WRAP = _CODES["checkpoint-before-fsdp-wrap"]  # CKPT003
CHECKPOINTED_BATCHNORM = _CODES["checkpointed-batchnorm"]  # CKPT010
STATEFUL_FORWARD = _CODES["checkpointed-stateful-forward"]  # CKPT011
INPUTS_WITHOUT_GRAD = _CODES["peft-checkpointing-without-input-grads"]  # CKPT021
REENTRANT_INPUTS_WITHOUT_GRAD = _CODES["reentrant-checkpoint-inputs-without-grad"]  # CKPT007
LATE_BINDING_CLOSURE = _CODES["late-binding-closure-in-checkpoint"]  # CKPT030
STATE_CHANGED_BEFORE_BACKWARD = _CODES["mutable-state-across-recompute"]  # CKPT031
KWARGS_TO_REENTRANT = _CODES["kwargs-to-reentrant-checkpoint"]  # CKPT032
RNG_NOT_PRESERVED = _CODES["rng-state-not-preserved-with-dropout"]  # CKPT033

HAZARD_CODES = frozenset(
    {
        REENTRANT_UNDER_FSDP,
        CHECKPOINT_BEFORE_FSDP_WRAP,
        CHECKPOINTED_BATCHNORM,
        STATEFUL_FORWARD,
        INPUTS_WITHOUT_GRAD,
        REENTRANT_INPUTS_WITHOUT_GRAD,
        LATE_BINDING_CLOSURE,
        STATE_CHANGED_BEFORE_BACKWARD,
        KWARGS_TO_REENTRANT,
        RNG_NOT_PRESERVED,
    }
)


def inputs_without_grad_code(from_hugging_face: bool) -> str:
    """The static rule a reentrant region whose inputs need no grad answers to: CKPT021 for
    a Hugging Face model's layers (the cure is `enable_input_require_grads()`), CKPT007 for
    any other region (`RegionCall.from_hugging_face`)."""
    return INPUTS_WITHOUT_GRAD if from_hugging_face else REENTRANT_INPUTS_WITHOUT_GRAD
