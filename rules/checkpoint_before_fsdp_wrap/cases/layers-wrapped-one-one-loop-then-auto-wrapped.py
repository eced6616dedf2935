# Layers wrapped one by one in a loop, then auto-wrapped; torch version unknown.
# ckptlint-case: column=23

from torch.distributed.fsdp import FullyShardedDataParallel
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

for i, layer in enumerate(model.layers):
    model.layers[i] = checkpoint_wrapper(layer)  # expect: CKPT003
model = FullyShardedDataParallel(model, auto_wrap_policy=wrap_policy)
