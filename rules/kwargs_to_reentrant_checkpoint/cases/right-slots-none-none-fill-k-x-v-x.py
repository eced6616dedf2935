# The right slots: `None, None` fill k_x and v_x.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class ResidualAttentionBlock(nn.Module):
    def forward(self, q_x, k_x=None, v_x=None, attn_mask=None):
        return q_x

class Transformer(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.resblocks = nn.ModuleList([ResidualAttentionBlock() for _ in range(layers)])

    def forward(self, x, attn_mask=None):
        for r in self.resblocks:
            if self.grad_checkpointing:
                x = checkpoint(r, x, None, None, attn_mask, use_reentrant=False)
            else:
                x = r(x, attn_mask=attn_mask)
        return x
