# Lists the forward builds itself, a module-level cache written by key, and `sys.path`.
# Lists the forward builds itself (one shadowing a module-level name), a module-level
# cache written by key, and `sys.path`.

import sys
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

feats = []
_MASKS = {}

class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        feats = []
        feats.append(x)
        _MASKS.setdefault(x.shape[-1], x.new_ones(x.shape[-1]))
        if "." not in sys.path:
            sys.path.append(".")
        return x + self.fc(x).relu() * _MASKS[x.shape[-1]] + feats[0]

    def run(self, x):
        return checkpoint(self, x, use_reentrant=False)
