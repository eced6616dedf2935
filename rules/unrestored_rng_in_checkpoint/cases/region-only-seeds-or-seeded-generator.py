# Region code that only seeds, or draws from a generator it makes with a seed: the same numbers again.
import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim, seed=0):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.seed = seed

    def forward(self, x):
        random.seed(self.seed)
        np.random.seed(self.seed)
        rng = np.random.default_rng(self.seed)
        g = torch.Generator().manual_seed(self.seed)
        scale = float(rng.uniform(0.9, 1.1))
        noise = torch.randn(x.shape, generator=g)
        return self.lin(x * scale + noise)


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = Block(dim)

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
