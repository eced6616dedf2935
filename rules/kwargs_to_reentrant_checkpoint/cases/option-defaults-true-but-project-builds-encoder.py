# The option defaults to True, but the project builds the encoder non-reentrant.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Encoder(nn.Module):
    def __init__(self, layers, use_reentrant=True):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.use_reentrant = use_reentrant

    def forward(self, x, pad_mask=None):
        for layer in self.layers:
            x = checkpoint(layer, x, pad_mask=pad_mask, use_reentrant=self.use_reentrant)
        return x

def build(layers):
    return Encoder(layers, use_reentrant=False)
