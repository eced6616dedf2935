# A module returning a project `@dataclass`, through a partial binding `use_reentrant=True`.
# ckptlint-case: column=15
# ckptlint-case: message-contains=the dataclass `StageOutput`
import functools
from dataclasses import dataclass

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

reentrant_checkpoint = functools.partial(checkpoint, use_reentrant=True)


@dataclass
class StageOutput:
    features: torch.Tensor
    skip: torch.Tensor


class Stage(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)
        self.down = nn.Conv2d(channels, channels, 3, stride=2, padding=1)

    def forward(self, x):
        skip = self.conv(x)
        return StageOutput(features=self.down(skip), skip=skip)


class UNetEncoder(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.stage = Stage(channels)

    def forward(self, x):
        out = reentrant_checkpoint(self.stage, x)  # expect: CKPT035
        return out.features, out.skip
