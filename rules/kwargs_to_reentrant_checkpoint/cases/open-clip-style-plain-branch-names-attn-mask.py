# open_clip-style: the plain branch names `attn_mask`, the checkpointed one puts it in `k_x`.
# open_clip-style: the plain branch names `attn_mask`, the checkpointed one puts it
# in the second slot, `k_x`.
# ckptlint-case: column=21
# ckptlint-case: message-contains=`attn_mask` is passed positionally into parameter `k_x` of `forward`

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
                x = checkpoint(r, x, attn_mask, use_reentrant=False)  # expect: CKPT032
            else:
                x = r(x, attn_mask=attn_mask)
        return x
