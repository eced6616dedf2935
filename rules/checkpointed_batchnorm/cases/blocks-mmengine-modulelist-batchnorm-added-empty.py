# Blocks in mmengine's `ModuleList`, BatchNorm added to an empty `nn.Sequential` with `add_module`.
# Blocks in mmengine's `ModuleList` (torch's, with an `init_cfg`), and a helper that
# builds an empty `nn.Sequential` and adds its BatchNorm with `add_module`.
# ckptlint-case: column=17
# ckptlint-case: message-contains=Stage.blocks -> (torch.nn.BatchNorm2d)

import torch.nn as nn
import torch.utils.checkpoint as cp
from mmengine.model import ModuleList

def conv_bn(c):
    result = nn.Sequential()
    result.add_module("conv", nn.Conv2d(c, c, 3, padding=1, bias=False))
    result.add_module("bn", nn.BatchNorm2d(c))
    return result

class Stage(nn.Module):
    def __init__(self, c=16, depth=2):
        super().__init__()
        self.blocks = ModuleList([conv_bn(c) for _ in range(depth)])

    def forward(self, x):
        for block in self.blocks:
            x = cp.checkpoint(block, x, use_reentrant=False)  # expect: CKPT010
        return x
