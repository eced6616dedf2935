# Non-reentrant on a torch with the fix.
# ckptlint-case: target-version=torch=2.4

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
model = FSDP(model, auto_wrap_policy=policy)
