# A value kept for inspection (FocalNet's modulator), set again to the same value.
# A value kept for inspection (FocalNet's modulator): the recomputation sets the
# attribute again to the value it computes from the same inputs; nothing moves twice.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Modulation(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = nn.Conv2d(8, 8, 1)
        self.modulator = None

    def forward(self, x):
        self.modulator = self.h(x)
        return x * self.modulator

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.modulation = Modulation()

    def forward(self, x):
        return checkpoint(self.modulation, x, use_reentrant=False)
