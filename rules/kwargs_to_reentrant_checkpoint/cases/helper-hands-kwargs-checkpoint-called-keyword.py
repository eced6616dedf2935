# A helper that hands its **kwargs to checkpoint, called with a keyword for the layer.
# ckptlint-case: column=16
# ckptlint-case: message-contains=keyword argument `attention_mask` passed through `_checkpoint_forward` (line 13)

import torch
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, attn):
        super().__init__()
        self.attn = attn

    def _checkpoint_forward(self, func, *args, **kwargs):
        if self.training:
            return torch.utils.checkpoint.checkpoint(func, *args, **kwargs)
        return func(*args, **kwargs)

    def forward(self, x, mask):
        return self._checkpoint_forward(self.attn, x, attention_mask=mask)  # expect: CKPT032
