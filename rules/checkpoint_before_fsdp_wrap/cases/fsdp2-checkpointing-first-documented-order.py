# FSDP2: checkpointing first is the documented order (torchtitan).

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.distributed.fsdp import fully_shard

for layer_id, block in model.layers.named_children():
    block = checkpoint_wrapper(block)
    model.layers.register_module(layer_id, block)
for block in model.layers.values():
    fully_shard(block)
fully_shard(model)
