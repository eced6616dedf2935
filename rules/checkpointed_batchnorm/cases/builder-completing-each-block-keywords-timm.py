# A builder completing each block's keywords, timm's factory turning BatchNorm2d into BatchNormAct2d.
# A builder completing each block's keywords (`ba["norm_layer"] = self.norm_layer`,
# timm's `EfficientNetBuilder`), and timm's factory turning BatchNorm2d into
# BatchNormAct2d.
# ckptlint-case: column=16
# ckptlint-case: message-contains=Net.blocks -> ConvNormAct.norm -> (timm.layers.norm_act.BatchNormAct2d)

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

class Builder:
    def __init__(self, norm_layer=None):
        self.norm_layer = norm_layer

    def make_block(self, ba):
        if self.norm_layer is not None:
            ba["norm_layer"] = self.norm_layer
        return ConvNormAct(**ba)

class Net(nn.Module):
    def __init__(self, defs):
        super().__init__()
        builder = Builder(norm_layer=nn.BatchNorm2d)
        self.blocks = nn.Sequential(*[builder.make_block(dict(d)) for d in defs])

    def forward(self, x):
        return checkpoint(self.blocks, x, use_reentrant=False)  # expect: CKPT010
