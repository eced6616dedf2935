# Noise drawn with an explicit `torch.Generator` the module keeps.
# ckptlint-case: column=16
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class NoisyBlock(nn.Module):
    def __init__(self, dim, sigma=0.1):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.sigma = sigma
        self.gen = torch.Generator().manual_seed(0)

    def forward(self, x):
        noise = torch.randn(x.shape, generator=self.gen) * self.sigma
        return self.lin(x + noise)


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.block = NoisyBlock(dim)

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)  # expect: CKPT036
