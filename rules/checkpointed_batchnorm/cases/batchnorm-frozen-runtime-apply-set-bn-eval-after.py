# BatchNorm frozen at runtime (`apply(set_bn_eval)` after `train()`, detectron2's converter).
# BatchNorm frozen at runtime: `model.apply(set_bn_eval)` after `model.train()`
# (faster-rcnn.pytorch), and a backbone converted by detectron2's converter.

import torch.nn as nn
from detectron2.layers import FrozenBatchNorm2d
from torch.utils.checkpoint import checkpoint

class Stage(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)

class Stem(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())
        FrozenBatchNorm2d.convert_frozen_batchnorm(self)

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)

def set_bn_eval(m):
    if isinstance(m, nn.modules.batchnorm._BatchNorm):
        m.eval()

def train(loader):
    stem, stage = Stem(), Stage()
    for x in loader:
        stage.train()
        stage.apply(set_bn_eval)
        stage(stem(x)).mean().backward()
