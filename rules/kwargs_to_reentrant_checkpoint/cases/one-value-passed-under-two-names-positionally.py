# One value passed under two names, positionally into both slots (open_clip's cross-attention).
# One value passed under two names, positionally into both slots (open_clip's
# cross-attention: `k_x=image_embs, v_x=image_embs`).

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class ResidualAttentionBlock(nn.Module):
    def forward(self, q_x, k_x=None, v_x=None, attn_mask=None):
        return q_x

class MultimodalTransformer(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.cross_attn = nn.ModuleList([ResidualAttentionBlock() for _ in range(layers)])

    def forward(self, image_embs, text_embs):
        for cross_attn in self.cross_attn:
            if self.grad_checkpointing:
                text_embs = checkpoint(cross_attn, text_embs, image_embs, image_embs, None, use_reentrant=False)
            else:
                text_embs = cross_attn(text_embs, k_x=image_embs, v_x=image_embs)
        return text_embs
