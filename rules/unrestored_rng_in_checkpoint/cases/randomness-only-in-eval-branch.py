# NumPy noise only in the `if not self.training:` branch (test-time augmentation): not in training.
import numpy as np
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.lin = nn.Linear(dim, dim)

    def forward(self, x):
        if not self.training:
            x = x + torch.from_numpy(np.random.randn(*x.shape)).to(x.dtype) * 0.01
        return self.lin(x)


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = Block(dim)

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
