# FSDP2 only, torchtitan's order: a reentrant `checkpoint_wrapper` on each block, then
# `fully_shard` per block and on the root. No harm measured under FSDP2: not reported.

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch.distributed.fsdp import fully_shard


def parallelize(model):
    for layer_id, block in model.layers.named_children():
        block = checkpoint_wrapper(block, checkpoint_impl=CheckpointImpl.REENTRANT)
        model.layers.register_module(layer_id, block)
    for block in model.layers.values():
        fully_shard(block)
    fully_shard(model)
    return model
