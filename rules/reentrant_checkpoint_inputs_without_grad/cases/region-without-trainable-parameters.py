# Regions with nothing to train: a frozen stem, a function of tensors alone.
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(0.79788456 * (x + 0.044715 * x.pow(3))))


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3)
        for p in self.stem.parameters():
            p.requires_grad = False
        self.head = nn.Linear(16, 2)

    def forward(self, pixel_values):
        h = checkpoint(self.stem, pixel_values, use_reentrant=True)
        h = checkpoint(gelu_tanh, h, use_reentrant=True)
        return self.head(h.mean((2, 3)))


model = Net()
