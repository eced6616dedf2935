# Reentrant: reported on torch 2.13 too.
# ckptlint-case: target-version=torch=2.13
# ckptlint-case: message-contains=all-gathers every unit twice

from functools import partial
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
)

reentrant = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)
apply_activation_checkpointing(model, checkpoint_wrapper_fn=reentrant, check_fn=is_block)  # expect: CKPT003
model = FSDP(model, auto_wrap_policy=policy)
