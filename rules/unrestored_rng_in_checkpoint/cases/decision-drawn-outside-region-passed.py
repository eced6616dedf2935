# Layer-drop decided outside the region (fairseq's `LayerDropModuleList` draws in `__iter__`).
import random

import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class LayerDropModuleList(nn.ModuleList):
    def __init__(self, p, modules=None):
        super().__init__(modules)
        self.p = p

    def __iter__(self):
        dropout_probs = [random.random() for _ in range(len(self))]
        for i, m in enumerate(super().__iter__()):
            if not self.training or dropout_probs[i] > self.p:
                yield m


class Encoder(nn.Module):
    def __init__(self, dim, n):
        super().__init__()
        self.layers = LayerDropModuleList(0.1, [nn.Linear(dim, dim) for _ in range(n)])

    def forward(self, x):
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=False)
        return x
