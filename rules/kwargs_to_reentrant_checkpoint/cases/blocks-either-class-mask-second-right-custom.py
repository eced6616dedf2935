# Blocks of either class: the mask second is right for the custom ones.
# ckptlint-case: target-version=open-clip-torch=2.20

import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from open_clip.transformer import CustomResidualAttentionBlock, ResidualAttentionBlock

class TextTower(nn.Module):
    def __init__(self, width, layers):
        super().__init__()
        self.resblocks = nn.ModuleList(
            [CustomResidualAttentionBlock(width, 8) if i % 2 else ResidualAttentionBlock(width, 8) for i in range(layers)]
        )

    def forward(self, x, attn_mask=None):
        for r in self.resblocks:
            if self.grad_checkpointing:
                x = checkpoint(r, x, attn_mask, use_reentrant=False)
            else:
                x = r(x, attn_mask=attn_mask)
        return x
