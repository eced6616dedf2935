# open_clip's own block, the mask after `None, None` for `k_x` and `v_x`: the right slot.
# open_clip's own block (`model/third_party_signatures.py`), the mask after `None, None`
# for `k_x` and `v_x`: the right slot.
# ckptlint-case: target-version=open-clip-torch=2.20

import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from open_clip.transformer import ResidualAttentionBlock

class TextTower(nn.Module):
    def __init__(self, width, layers):
        super().__init__()
        self.resblocks = nn.ModuleList([ResidualAttentionBlock(width, 8) for _ in range(layers)])

    def forward(self, x, attn_mask=None):
        for r in self.resblocks:
            if self.grad_checkpointing:
                x = checkpoint(r, x, None, None, attn_mask, use_reentrant=False)
            else:
                x = r(x, attn_mask=attn_mask)
        return x
