# A splatted dict that is not one literal: what it holds is not known.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Block(nn.Module):
    def __init__(self, fast):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))
        self.ckpt_kwargs = {"preserve_rng_state": False} if fast else {}

    def forward(self, x):
        return checkpoint(self.mlp, x, use_reentrant=False, **self.ckpt_kwargs)
