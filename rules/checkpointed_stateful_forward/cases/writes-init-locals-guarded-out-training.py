# Writes in __init__, to locals, or guarded out of training.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = []
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        y = self.proj(x)
        if not self.training:
            self.cache.append(y)
        scratch = [y]
        scratch.append(y)
        return y

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, x):
        return checkpoint(self.attn, x, use_reentrant=False)
