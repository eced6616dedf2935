# Checkpointing for the single-device run, the wrap for the sharded one: never both.
# ckptlint-case: target-version=torch=2.0

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

def setup(model, args, policy):
    if args.activation_checkpointing and not args.fsdp:
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
    if args.fsdp:
        model = FSDP(model, auto_wrap_policy=policy)
    return model
