# No randomness in the region; the default; p=0.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(8)
        self.drop = nn.Dropout(0.0)
        self.mlp = nn.Linear(8, 8)

    def forward(self, x):
        x = checkpoint(self.norm, x, use_reentrant=False, preserve_rng_state=False)
        x = checkpoint(self.drop, x, use_reentrant=False, preserve_rng_state=False)
        return checkpoint(self.mlp, x, use_reentrant=False)
