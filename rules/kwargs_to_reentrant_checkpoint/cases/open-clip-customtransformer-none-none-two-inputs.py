# open_clip's `CustomTransformer`: `None, None` are two inputs too many for the custom block.
# open_clip's `CustomTransformer` (2.29 to 3.x): the `None, None` that fill
# `ResidualAttentionBlock`'s `k_x` and `v_x` are two inputs too many for the custom
# block, whose forward takes `(x, attn_mask)`.
# ckptlint-case: column=21
# ckptlint-case: message-contains=hands 4 positional inputs to `forward`, which takes 2 (`x, attn_mask=None`): `TypeError`

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class CustomBlock(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.mlp = nn.Linear(width, width)

    def forward(self, x, attn_mask=None):
        return x + self.mlp(x)

class CustomTransformer(nn.Module):
    def __init__(self, width, layers):
        super().__init__()
        self.grad_checkpointing = False
        self.resblocks = nn.ModuleList([CustomBlock(width) for _ in range(layers)])

    def forward(self, x, attn_mask=None):
        for r in self.resblocks:
            if self.grad_checkpointing:
                x = checkpoint(r, x, None, None, attn_mask, use_reentrant=False)  # expect: CKPT032
            else:
                x = r(x, attn_mask=attn_mask)
        return x
