# Non-reentrant in non-reentrant, the inner checkpoint the wrapped forward's last computation.
# Non-reentrant in non-reentrant, the inner checkpoint the wrapped forward's last
# computation: torch's early stop recomputes the layers once.
# ckptlint-case: target-version=torch=2.13

import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

class Block(nn.Module):
    def forward(self, x):
        return checkpoint(self.inner, self.norm(x), use_reentrant=False)

apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
