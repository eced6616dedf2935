# OpenMMLab blocks: a GroupNorm config, a ConvModule without a norm, a backbone's `norm_eval`.
# OpenMMLab blocks: a GroupNorm config, a ConvModule without a norm, and BatchNorm
# kept in eval mode by the backbone's `norm_eval`.

import torch.utils.checkpoint as cp
from mmcv.cnn import ConvModule, build_norm_layer
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

class Block(nn.Module):
    def __init__(self, channels, with_cp=True, norm_cfg=dict(type="GN", num_groups=8)):
        super().__init__()
        self.conv = ConvModule(channels, channels, 3, padding=1)
        self.norm = build_norm_layer(norm_cfg, channels)[1]
        self.with_cp = with_cp

    def forward(self, x):
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(lambda t: self.norm(self.conv(t)), x, use_reentrant=False)
        return self.norm(self.conv(x))

class FrozenBlock(nn.Module):
    def __init__(self, channels, with_cp=True):
        super().__init__()
        self.conv = ConvModule(channels, channels, 3, padding=1, norm_cfg=dict(type="BN"))
        self.with_cp = with_cp

    def forward(self, x):
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self.conv, x, use_reentrant=False)
        return self.conv(x)

class Backbone(nn.Module):
    def __init__(self, norm_eval=True):
        super().__init__()
        self.norm_eval = norm_eval
        self.blocks = nn.Sequential(FrozenBlock(64), FrozenBlock(64))

    def train(self, mode=True):
        super().train(mode)
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()
