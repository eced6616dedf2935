# `use_reentrant` from a constructor option that defaults to True, with keywords.
# `use_reentrant` from a constructor option that defaults to True (nothing in the
# project passes another value): the keywords crash every checkpointed step.
# ckptlint-case: column=17
# ckptlint-case: message-contains=(`use_reentrant=self.use_reentrant`, True by default and wherever the project sets it)

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Encoder(nn.Module):
    def __init__(self, layers, use_reentrant=True):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.use_reentrant = use_reentrant

    def forward(self, x, pad_mask=None):
        for layer in self.layers:
            x = checkpoint(layer, x, pad_mask=pad_mask, use_reentrant=self.use_reentrant)  # expect: CKPT032
        return x
