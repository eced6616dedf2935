# open_clip's own block from 2.11 on: the mask second lands in `k_x`.
# open_clip's own block from 2.11 on: `forward(q_x, k_x=None, v_x=None, attn_mask=None)`
# (`model/third_party_signatures.py`), the mask second lands in `k_x`.
# ckptlint-case: target-version=open-clip-torch=2.20
# ckptlint-case: column=21
# ckptlint-case: message-contains=`attn_mask` is passed positionally into parameter `k_x` of `ResidualAttentionBlock.forward` (open-clip-torch>=2.11), while the non-checkpointed branch passes it as `attn_mask=`

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
                x = checkpoint(r, x, attn_mask, use_reentrant=False)  # expect: CKPT032
            else:
                x = r(x, attn_mask=attn_mask)
        return x
