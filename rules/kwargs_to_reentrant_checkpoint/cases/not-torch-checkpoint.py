# Not torch's checkpoint.

from deepspeed.checkpointing import checkpoint
y = checkpoint(block, x, mask=mask)
