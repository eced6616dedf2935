# checkpoint_wrapper's own default is non-reentrant; a variable is not known.

import functools
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing, checkpoint_wrapper,
)
from torch.distributed.fsdp import fully_shard

def setup(model, impl):
    wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=impl)
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=checkpoint_wrapper)
    fully_shard(model)
