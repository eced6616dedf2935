# A block that checkpoints itself only behind its flag, also wrapped.
# A block that checkpoints itself only behind its flag, also wrapped: the flag is off
# unless someone turns it on.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

class Block(nn.Module):
    def forward(self, x):
        if self.gradient_checkpointing and self.training:
            return checkpoint(self.inner, x, use_reentrant=False)
        return self.inner(x)

apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
