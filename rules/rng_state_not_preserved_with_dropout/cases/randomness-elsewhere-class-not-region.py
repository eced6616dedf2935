# Randomness elsewhere in the class, not in the region.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Linear(8, 8)
        self.drop = nn.Dropout(0.1)

    def _inner(self, x):
        return self.mlp(x)

    def forward(self, x):
        return self.drop(checkpoint(self._inner, x, use_reentrant=False, preserve_rng_state=False))
