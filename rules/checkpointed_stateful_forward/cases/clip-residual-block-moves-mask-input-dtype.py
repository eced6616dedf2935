# CLIP's residual block moves its mask to the input's dtype and device: the same tensor again.
# CLIP's residual block moves its mask to the input's dtype and device: the
# recomputation converts it again and writes the same tensor.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint_sequential

class ResidualAttentionBlock(nn.Module):
    def __init__(self, width, attn_mask=None):
        super().__init__()
        self.attn = nn.MultiheadAttention(width, 8)
        self.attn_mask = attn_mask

    def attention(self, x):
        self.attn_mask = self.attn_mask.to(dtype=x.dtype, device=x.device) if self.attn_mask is not None else None
        return self.attn(x, x, x, need_weights=False, attn_mask=self.attn_mask)[0]

    def forward(self, x):
        return x + self.attention(x)

class Transformer(nn.Module):
    def __init__(self, width, layers):
        super().__init__()
        self.resblocks = nn.Sequential(*[ResidualAttentionBlock(width) for _ in range(layers)])

    def forward(self, x):
        return checkpoint_sequential(self.resblocks, 2, x, use_reentrant=False)
