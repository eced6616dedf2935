# A NumPy Generator the module keeps (`self.rng = np.random.default_rng(seed)`), drawn in forward.
# ckptlint-case: column=16
import numpy as np
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class SpanMask(nn.Module):
    def __init__(self, dim, seed=0):
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.rng = np.random.default_rng(seed)

    def forward(self, x):
        start = int(self.rng.integers(0, x.shape[1]))
        x = x.clone()
        x[:, start:start + 4] = 0
        return self.lin(x)


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.mask = SpanMask(dim)

    def forward(self, x):
        return checkpoint(self.mask, x, use_reentrant=False)  # expect: CKPT036
