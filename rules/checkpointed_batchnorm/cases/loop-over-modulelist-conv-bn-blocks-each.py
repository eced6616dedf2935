# A loop over a `ModuleList` of Conv-BN blocks, each checkpointed.
# ckptlint-case: column=17
# ckptlint-case: message-contains=Stage.blocks -> ConvBNAct.bn -> (torch.nn.BatchNorm2d)

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class ConvBNAct(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)

class Stage(nn.Module):
    def __init__(self, channels, depth):
        super().__init__()
        self.blocks = nn.ModuleList([ConvBNAct(channels) for _ in range(depth)])

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)  # expect: CKPT010
        return x
