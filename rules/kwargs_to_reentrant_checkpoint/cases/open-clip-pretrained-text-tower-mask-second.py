# open_clip's pretrained text tower with the mask second, the version unknown: nothing is said.

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
                x = checkpoint(r, x, attn_mask, use_reentrant=False)
            else:
                x = r(x, attn_mask=attn_mask)
        return x
