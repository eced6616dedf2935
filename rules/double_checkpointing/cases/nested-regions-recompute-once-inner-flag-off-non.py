# Nested regions that recompute once: the inner flag off, non-reentrant inner checkpoint returned.
# Nested regions that recompute once: the inner block built with its flag off, and
# non-reentrant inside non-reentrant on torch >= 2.1, returned by the inner forward.
# ckptlint-case: target-version=torch=2.13

import torch.utils.checkpoint as cp
from torch import nn

class Context(nn.Module):
    def __init__(self, channels, with_cp=False):
        super().__init__()
        self.fc = nn.Linear(channels, channels)
        self.with_cp = with_cp

    def forward(self, x):
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self.fc, x)
        return self.fc(x)

class Inner(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.fc = nn.Linear(channels, channels)

    def forward(self, x):
        return cp.checkpoint(self.fc, x, use_reentrant=False)

class Block(nn.Module):
    def __init__(self, channels, with_cp=False):
        super().__init__()
        self.context = Context(channels, with_cp=False)
        self.inner = Inner(channels)
        self.with_cp = with_cp

    def forward(self, x):
        if self.with_cp and x.requires_grad:
            x = cp.checkpoint(self.context, x, use_reentrant=False)
            return cp.checkpoint(self.inner, x, use_reentrant=False)
        return self.inner(self.context(x))
