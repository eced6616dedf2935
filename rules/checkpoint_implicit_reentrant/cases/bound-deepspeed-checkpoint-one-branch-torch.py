# Bound to DeepSpeed's checkpoint on one branch and torch's on the other, the flag bound with torch's.
# Bound to DeepSpeed's on one branch and torch's on the other, with the flag bound
# where torch's is imported (the `partial` makes the call a site of its own).

import functools
try:
    from deepspeed.checkpointing import checkpoint
except ImportError:
    from torch.utils.checkpoint import checkpoint as torch_checkpoint
    checkpoint = functools.partial(torch_checkpoint, use_reentrant=False)

y = checkpoint(block, x)
