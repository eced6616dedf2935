# `context_fn` (non-reentrant only) under torch's implicit reentrant default.
# ckptlint-case: column=5
# ckptlint-case: message-contains=only supported when use_reentrant=False

from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts
y = checkpoint(f, x, context_fn=policy)  # expect: CKPT032
