# A project function that happens to be called `random` (no RNG at all).
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


def random(x):
    return x.flip(-1)


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        return self.lin(random(x))


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = Block(dim)

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
