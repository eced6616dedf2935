# `generator=` a parameter defaulting to None, or an attribute holding None: torch's default generator.
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


def randn_tensor(shape, generator=None, dtype=None):
    return torch.randn(shape, generator=generator, dtype=dtype)


class NoiseBlock(nn.Module):
    def __init__(self, dim, generator=None):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.generator = generator

    def add_noise(self, x, generator=None):
        return x + torch.randn(x.shape, generator=generator)

    def forward(self, x):
        x = self.add_noise(x) + randn_tensor(x.shape, dtype=x.dtype)
        return self.lin(x + torch.rand(x.shape, generator=self.generator))


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = NoiseBlock(dim)

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)
