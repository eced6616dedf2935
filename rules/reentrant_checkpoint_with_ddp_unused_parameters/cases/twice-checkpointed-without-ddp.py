# A shared block checkpointed twice, reentrant, in a project with no DDP: single-process
# training runs (CKPT001 speaks of the implicit default, not this rule).
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class TiedEncoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.block = nn.Linear(dim, dim)

    def forward(self, x):
        x = checkpoint(self.block, x, use_reentrant=True)
        return checkpoint(self.block, x, use_reentrant=True)
