# Non-reentrant, on a torch that fails on the nesting.
# ckptlint-case: target-version=torch=2.0
# ckptlint-case: column=5

import functools
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    CheckpointImpl, apply_activation_checkpointing, checkpoint_wrapper,
)

def setup(model, policy):
    wrapper = functools.partial(checkpoint_wrapper, checkpoint_impl=CheckpointImpl.NO_REENTRANT)
    # checkpoint every block
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper)  # expect: CKPT003
    sharded = FSDP(model, auto_wrap_policy=policy, use_orig_params=True)
    return sharded
