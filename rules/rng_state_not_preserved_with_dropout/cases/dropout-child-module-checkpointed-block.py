# Dropout in a child module of the checkpointed block.
# ckptlint-case: column=16
# ckptlint-case: message-contains=Block.attn -> Attention.attn_drop -> (torch.nn.Dropout)

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self.attn_drop = nn.Dropout(0.1)

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attention()

    def forward(self, x):
        return checkpoint(self.attn, x, use_reentrant=False, preserve_rng_state=False)  # expect: CKPT033
