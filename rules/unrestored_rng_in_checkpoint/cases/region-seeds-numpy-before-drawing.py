# BigBird-style random attention blocks: the region seeds NumPy with a fixed seed, then draws (in another method).
import numpy as np
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class BlockSparseAttention(nn.Module):
    def __init__(self, dim, seed):
        super().__init__()
        self.qkv = nn.Linear(dim, dim * 3)
        self.seed = seed

    def _random_blocks(self, n):
        return np.random.permutation(n)[:2]

    def forward(self, x):
        np.random.seed(self.seed)
        blocks = torch.as_tensor(self._random_blocks(x.shape[1]))
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return torch.softmax(q @ k[:, blocks].transpose(1, 2), dim=-1) @ v[:, blocks]


class Encoder(nn.Module):
    def __init__(self, dim, depth=2):
        super().__init__()
        self.layers = nn.ModuleList([BlockSparseAttention(dim, seed=i) for i in range(depth)])

    def forward(self, x):
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False)
        return x
