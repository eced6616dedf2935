# The keyword in a dict splatted into the call: the fix edits the dict.
# ckptlint-case: column=16

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))
        self.ckpt_kwargs = {"use_reentrant": False, "preserve_rng_state": False}

    def forward(self, x):
        return checkpoint(self.mlp, x, **self.ckpt_kwargs)  # expect: CKPT033
