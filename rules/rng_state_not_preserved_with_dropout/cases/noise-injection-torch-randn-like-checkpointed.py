# Noise injection: `torch.randn_like` in the checkpointed module's forward.
# ckptlint-case: column=16
# ckptlint-case: message-contains=Net.block -> Noisy.forward: `randn_like`

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Noisy(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        h = self.fc(x)
        if self.training:
            h = h + 0.05 * torch.randn_like(h)
        return torch.tanh(h)

class Net(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.block = Noisy(d)

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False, preserve_rng_state=False)  # expect: CKPT033
