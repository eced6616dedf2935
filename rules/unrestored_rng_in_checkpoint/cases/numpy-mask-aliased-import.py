# A NumPy mask drawn in the forward of a checkpointed module, NumPy imported under an alias.
# ckptlint-case: column=16
import numpy as onp
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class TokenDrop(nn.Module):
    def __init__(self, dim, keep=0.9):
        super().__init__()
        self.proj = nn.Linear(dim, dim)
        self.keep = keep

    def forward(self, x):
        mask = torch.from_numpy(onp.random.rand(*x.shape[:2]) < self.keep).to(x.dtype)
        return self.proj(x) * mask.unsqueeze(-1)


class Encoder(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.drop = TokenDrop(dim)

    def forward(self, x):
        return checkpoint(self.drop, x, use_reentrant=True)  # expect: CKPT036
