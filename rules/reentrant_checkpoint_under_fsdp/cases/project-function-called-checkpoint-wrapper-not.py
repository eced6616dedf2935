# A project function called `checkpoint_wrapper` is not torch's.

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

def checkpoint_wrapper(module, checkpoint_impl=None):
    return module

layer = checkpoint_wrapper(Block(), checkpoint_impl=CheckpointImpl.REENTRANT)
model = FSDP(model)
