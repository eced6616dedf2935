# The cache set in the `else:` of a check on it (litgpt's adapter prefix).
# The cache set in the `else:` of a check on it (litgpt's adapter prefix): the
# recomputation finds it set and reads it.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Prefix(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(4, 8)
        self.kv_cache = None

    def forward(self, x):
        if self.kv_cache is not None:
            prefix = self.kv_cache
        else:
            prefix = self.wte.weight.sum(0)
            self.kv_cache = prefix
        return x + prefix

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.prefix = Prefix()

    def forward(self, x):
        return checkpoint(self.prefix, x, use_reentrant=False)
