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
