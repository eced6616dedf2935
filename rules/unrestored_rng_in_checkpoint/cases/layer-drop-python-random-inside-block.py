# Stochastic depth decided with `random.random()` inside each checkpointed block.
# ckptlint-case: column=17
import random
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim, drop_rate=0.1):
        super().__init__()
        self.mlp = nn.Linear(dim, dim)
        self.drop_rate = drop_rate

    def forward(self, x):
        if self.training and random.random() < self.drop_rate:
            return x
        return x + self.mlp(x)


class Model(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.blocks = nn.ModuleList([Block(dim) for _ in range(4)])

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)  # expect: CKPT036
        return x
