# Python's `random` used elsewhere in the class (in `__init__` and a method the region does not run).
import random

import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.tag = random.randint(0, 100)

    def pick(self):
        return random.choice([1, 2, 3])

    def forward(self, x):
        return self.lin(x)


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = Block(dim)

    def forward(self, x):
        k = self.block.pick()
        return checkpoint(self.block, x, use_reentrant=False) * k
