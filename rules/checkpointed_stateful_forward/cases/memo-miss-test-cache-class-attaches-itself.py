# A memo's miss test, on a cache the class attaches itself.
# ckptlint-case: column=9
# ckptlint-case: message-contains=`self.kv_cache.update(...)`

import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from .cache import KVCache

class Attention(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.wk = nn.Linear(d, d)
        self.kv_cache = KVCache(d)

    def forward(self, x):
        k = self.wk(x)
        if hasattr(self, "kv_cache"):
            k = self.kv_cache.update(k)
        return k

model = checkpoint_wrapper(nn.Sequential(Attention()))  # expect: CKPT011
