# The wrapper through a partial handed to apply_activation_checkpointing.
# ckptlint-case: column=11
# ckptlint-case: message-contains=(applied by `apply_activation_checkpointing` at example.py:12)

from functools import partial
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
)
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

wrapper = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)  # expect: CKPT002
apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)
model = FSDP(model)
