# GPT-NeoX / Hugging Face style cache writes behind `use_cache`, and a flag guard.
# GPT-NeoX / Hugging Face style cache writes behind `use_cache` (off in checkpointed
# training), and a flag guard.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Attention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.use_cache = config.use_cache
        self.key_cache = []
        self.proj = nn.Linear(8, 8)

    def _attend(self, x, use_cache=False):
        if use_cache:
            self.key_cache.append(x)
        if self.use_cache and x.shape[0] > 1:
            self.key_cache.append(x)
        if not self.use_cache:
            return self.proj(x)
        self.key_cache.append(x)
        return self.proj(x)

    def forward(self, x):
        return checkpoint(self._attend, x, use_reentrant=False)
