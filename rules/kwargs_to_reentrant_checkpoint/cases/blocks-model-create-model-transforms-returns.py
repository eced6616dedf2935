# Blocks of the model `create_model_and_transforms` returns (open_clip 2.24): the mask lands in `k_x`.
# Blocks of the model `create_model_and_transforms` returns, open_clip 2.24: all
# `ResidualAttentionBlock`s (`model/open_clip_models.py`).
# ckptlint-case: target-version=open-clip-torch=2.24
# ckptlint-case: column=21
# ckptlint-case: message-contains=parameter `k_x` of `ResidualAttentionBlock.forward` (open-clip-torch>=2.11)

import open_clip
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class FrozenOpenCLIPEmbedder(nn.Module):
    def __init__(self, arch="ViT-H-14", version="laion2b_s32b_b79k"):
        super().__init__()
        model, _, _ = open_clip.create_model_and_transforms(arch, pretrained=version)
        self.model = model

    def text_transformer_forward(self, x, attn_mask=None):
        for r in self.model.transformer.resblocks:
            if self.model.transformer.grad_checkpointing:
                x = checkpoint(r, x, attn_mask, use_reentrant=False)  # expect: CKPT032
            else:
                x = r(x, attn_mask=attn_mask)
        return x
