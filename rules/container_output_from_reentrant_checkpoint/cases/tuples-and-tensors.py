# Blocks returning a tensor or a tuple: the reentrant checkpoint keeps them in the graph.
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + self.fc(x)


class TwoOutputs(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x, mask=None):
        h = self.fc(x)
        if mask is not None:
            return h * mask, h
        return h, h.mean()


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = Block(dim)
        self.two = TwoOutputs(dim)

    def forward(self, x):
        x = checkpoint(self.block, x, use_reentrant=True)
        h, pooled = checkpoint(self.two, x, use_reentrant=True)
        return h, pooled
