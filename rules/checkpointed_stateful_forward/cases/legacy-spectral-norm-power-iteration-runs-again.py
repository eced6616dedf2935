# The legacy spectral norm's power iteration runs again in the recomputation.
# ckptlint-case: column=16
# ckptlint-case: message-contains=Discriminator.conv -> (spectral_norm: its power iteration updates

import torch.nn as nn
from torch.nn.utils import spectral_norm
from torch.utils.checkpoint import checkpoint

class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = spectral_norm(nn.Conv2d(64, 64, 3, padding=1))

    def forward(self, x):
        return checkpoint(self.conv, x, use_reentrant=False)  # expect: CKPT011
