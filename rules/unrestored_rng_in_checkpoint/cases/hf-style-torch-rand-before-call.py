# Hugging Face's layer-drop: `torch.rand([])` (default generator) drawn before the checkpointed call.
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Encoder(nn.Module):
    def __init__(self, dim, n, layerdrop=0.1):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(n)])
        self.layerdrop = layerdrop

    def forward(self, x):
        for layer in self.layers:
            if self.training:
                dropout_probability = torch.rand([])
                if dropout_probability < self.layerdrop:
                    continue
            x = checkpoint(layer, x, use_reentrant=False)
        return x
