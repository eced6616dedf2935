# A keyword open_clip's block does not take, through `import open_clip` and the module path.
# ckptlint-case: target-version=open-clip-torch=3.0
# ckptlint-case: column=17
# ckptlint-case: message-contains=parameter `k_x` of `ResidualAttentionBlock.forward` (open-clip-torch>=2.11)

import open_clip
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Adapter(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.block = open_clip.transformer.ResidualAttentionBlock(width, 8)

    def forward(self, x, attn_mask=None):
        if self.grad_checkpointing:
            x = checkpoint(self.block, x, attn_mask, use_reentrant=False)  # expect: CKPT032
        else:
            x = self.block(x, attn_mask=attn_mask)
        return x
