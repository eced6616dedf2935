# Four inputs for a block that takes four, or `*args`; a loop over blocks of which one takes four.
# Four inputs for a block that takes four, or `*args`; a loop over blocks of two
# classes of which one takes four: not every callee rejects them.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class QKVBlock(nn.Module):
    def forward(self, q_x, k_x=None, v_x=None, attn_mask=None):
        return q_x

class CustomBlock(nn.Module):
    def forward(self, x, attn_mask=None):
        return x

class AnyBlock(nn.Module):
    def forward(self, x, *rest):
        return x

class Tower(nn.Module):
    def __init__(self, custom):
        super().__init__()
        self.resblocks = nn.ModuleList([CustomBlock() if custom else QKVBlock(), AnyBlock()])

    def forward(self, x, attn_mask=None):
        for r in self.resblocks:
            x = checkpoint(r, x, None, None, attn_mask, use_reentrant=False)
        return x
