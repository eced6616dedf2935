# FSDP wraps the checkpoint wrapper itself; and the right order.

from functools import partial
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
)

layers = [FSDP(checkpoint_wrapper(Block())) for _ in range(4)]
model = FSDP(model, auto_wrap_policy=policy)
wrapper = partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.REENTRANT)
apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)
