# A flag the project sets both ways, and a module constant that keeps the bookkeeping.
# A flag the project sets both ways (decided at run time), and a module constant that
# keeps the bookkeeping.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

PRESERVE_RNG = True

class Block(nn.Module):
    def __init__(self, preserve_rng=False):
        super().__init__()
        self.preserve_rng = preserve_rng
        self.mlp = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))

    def forward(self, x):
        x = checkpoint(self.mlp, x, use_reentrant=False, preserve_rng_state=self.preserve_rng)
        return checkpoint(self.mlp, x, use_reentrant=False, preserve_rng_state=PRESERVE_RNG)

blocks = [Block(preserve_rng=True), Block()]
