# No auto-wrap policy: one unit, nothing nested inside the wrappers.

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

apply_activation_checkpointing(model)
model = FSDP(model)
