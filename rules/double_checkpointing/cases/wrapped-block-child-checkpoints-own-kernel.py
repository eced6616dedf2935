# The wrapped block's child checkpoints its own kernel: reported at the wrapper.
# ckptlint-case: target-version=torch=2.13
# ckptlint-case: column=9
# ckptlint-case: message-contains=Block.attention -> Attention.forward: `checkpoint` at example.py:17, non-reentrant

import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

class Attention(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x):
        y = checkpoint(self.kernel, *self.qkv(x).chunk(3, -1), use_reentrant=False)
        return self.out(y)

class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attention = Attention(dim)

    def forward(self, x):
        return x + self.attention(x)

layer = checkpoint_wrapper(Block(64))  # expect: CKPT005
