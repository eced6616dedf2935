# torch's default generator inside the region (`torch.rand` without `generator=`, `F.dropout`): replayed.
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim, drop_path=0.1):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.drop_path = drop_path

    def forward(self, x):
        keep = (torch.rand(x.shape[0], 1, generator=None) > self.drop_path).to(x.dtype)
        return x + F.dropout(self.lin(x), 0.1, training=self.training) * keep


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = Block(dim)

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
