# A custom `checkpoint_fn`: it, not `checkpoint_impl`, decides the implementation.

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch.distributed.fsdp import fully_shard
from .checkpointing import pytree_reentrant_checkpoint

def shard(model):
    for index, layer in enumerate(model.layers):
        layer = checkpoint_wrapper(
            layer, checkpoint_impl=CheckpointImpl.REENTRANT, checkpoint_fn=pytree_reentrant_checkpoint
        )
        model.layers[index] = fully_shard(layer)
