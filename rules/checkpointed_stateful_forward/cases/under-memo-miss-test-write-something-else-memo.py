# Under a memo's miss test, a write to something else than the memo still counts.
# ckptlint-case: column=16
# ckptlint-case: message-contains=Rope.forward: `self.misses` assigned (line 19))

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Rope(nn.Module):
    def __init__(self):
        super().__init__()
        self.freqs = {}
        self.misses = 0

    def forward(self, x):
        size = x.shape[-1]
        if size not in self.freqs:
            self.freqs[size] = torch.randn(size)
            self.misses += 1
        return x * self.freqs[size]

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.rope = Rope()

    def forward(self, x):
        return checkpoint(self.rope, x, use_reentrant=False)  # expect: CKPT011
