# A cache written under `hasattr(self, ...)` that nothing in the class attaches (lingua's attention).
# A cache written under `hasattr(self, ...)` that nothing in the class attaches:
# lingua's attention, whose `kv_cache` only its generation code sets.

import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

class Attention(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.wk = nn.Linear(d, d)

    def forward(self, x):
        k = self.wk(x)
        if hasattr(self, "kv_cache"):
            k = self.kv_cache.update(k)
        return k

model = checkpoint_wrapper(nn.Sequential(Attention()))
