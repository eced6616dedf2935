# A library block the table does not hold (timm's): nothing known, nothing said.
# ckptlint-case: target-version=open-clip-torch=2.20

import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from timm.models.vision_transformer import Block

class Tower(nn.Module):
    def __init__(self, width, layers):
        super().__init__()
        self.blocks = nn.ModuleList([Block(width, 8) for _ in range(layers)])

    def forward(self, x, attn_mask=None):
        for blk in self.blocks:
            if self.grad_checkpointing:
                x = checkpoint(blk, x, attn_mask, use_reentrant=False)
            else:
                x = blk(x, attn_mask=attn_mask)
        return x
