# Both non-reentrant on torch >= 2.1: torch's nesting support recomputes once.
# ckptlint-case: target-version=torch=2.13
# ckptlint-case: target-version=transformers=5.17

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

model.gradient_checkpointing_enable()
apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, DecoderLayer))
