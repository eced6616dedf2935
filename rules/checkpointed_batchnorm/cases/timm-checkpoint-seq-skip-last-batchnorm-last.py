# timm's `checkpoint_seq` with `skip_last`: the BatchNorm, last, runs plainly.
# timm's `checkpoint_seq` with `skip_last`: the last member (the BatchNorm) runs
# plainly; with a flag only known at runtime, nothing is said either.

import torch.nn as nn
from timm.models import checkpoint_seq

class Head(nn.Module):
    def __init__(self, skip=True):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.BatchNorm1d(8))
        self.skip = skip

    def forward(self, x):
        x = checkpoint_seq(self.layers, x, skip_last=True)
        return checkpoint_seq(self.layers, x, skip_last=self.skip)
