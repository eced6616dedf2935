# Keyword dicts completed item by item, with GroupNorm or another key than the norm's.
# Keyword dicts completed item by item: GroupNorm stored, or another key than the
# norm's; timm's factory given GroupNorm builds GroupNormAct.

import torch.nn as nn
from timm.layers import get_norm_act_layer
from torch.utils.checkpoint import checkpoint

class ConvNormAct(nn.Module):
    def __init__(self, chs, norm_layer=nn.GroupNorm, act_layer=nn.ReLU):
        super().__init__()
        self.conv = nn.Conv2d(chs, chs, 3, padding=1)
        self.norm = get_norm_act_layer(norm_layer, act_layer)(chs)

    def forward(self, x):
        return self.norm(self.conv(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        gn = dict(chs=16)
        gn["norm_layer"] = nn.GroupNorm
        act = dict(chs=16)
        act["act_layer"] = nn.GELU
        self.blocks = nn.Sequential(ConvNormAct(**gn), ConvNormAct(**act))

    def forward(self, x):
        return checkpoint(self.blocks, x, use_reentrant=False)
