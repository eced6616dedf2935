# Noise drawn outside the region, and a permutation drawn when the module is built.
# Noise drawn outside the region (its tensor is an input, saved as it is) and a
# permutation drawn when the module is built.

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Shuffle(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.register_buffer("perm", torch.randperm(d))
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return self.fc(x[:, self.perm])

class Net(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.block = Shuffle(d)

    def forward(self, x):
        x = x + 0.1 * torch.randn_like(x)
        return checkpoint(self.block, x, use_reentrant=False, preserve_rng_state=False)
