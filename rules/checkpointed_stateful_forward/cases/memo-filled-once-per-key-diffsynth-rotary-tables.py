# A memo filled once per key (DiffSynth's rotary tables): the recomputation finds it.

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Rope(nn.Module):
    def __init__(self):
        super().__init__()
        self.freqs = {}

    def forward(self, x):
        size = x.shape[-1]
        if size not in self.freqs:
            self.freqs.update({size: torch.randn(size)})
        return x * self.freqs[size]

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.rope = Rope()

    def forward(self, x):
        return checkpoint(self.rope, x, use_reentrant=False)
