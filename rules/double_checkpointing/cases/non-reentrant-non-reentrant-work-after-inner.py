# Non-reentrant in non-reentrant, with work after the inner checkpoint: its layers run twice more.
# Non-reentrant in non-reentrant, with work after the inner checkpoint: its layers
# run in the outer recomputation and again in its own backward.
# ckptlint-case: target-version=torch=2.13
# ckptlint-case: column=13

import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

class Block(nn.Module):
    def forward(self, x):
        h = checkpoint(self.attention, self.norm(x), use_reentrant=False)  # expect: CKPT005
        return x + self.proj(h)

apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
