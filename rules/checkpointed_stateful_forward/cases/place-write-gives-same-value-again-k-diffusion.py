# An in-place write that gives the same value again (k-diffusion's clamped scale, `fill_(0)`).
# An in-place write that gives the same value again (k-diffusion's scale, clamped to
# a bound the module holds, `fill_(0)`): measured, the gradients of the plain forward.

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class RMSNorm(nn.Module):
    def __init__(self, d, max_scale=2.0):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(d))
        self.max_scale = max_scale
        self.register_buffer("mask", torch.ones(d))

    @torch.no_grad()
    def proj_(self):
        self.scale.clamp_(max=self.max_scale)

    def forward(self, x):
        self.proj_()
        self.mask.fill_(1.0)
        return x * torch.exp(0.5 * self.scale) * self.mask

class Block(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.norm = RMSNorm(d)

    def forward(self, x):
        return checkpoint(self.norm, x, use_reentrant=False)
