# `.apply` of a function that only initialises BatchNorm, and `convert_sync_batchnorm`.
# `.apply` of a function that initialises BatchNorm (its mode untouched), and a converter
# whose replacement still updates statistics (`convert_sync_batchnorm`).
# ckptlint-case: column=16
# ckptlint-case: message-contains=Stage.block -> (torch.nn.BatchNorm2d)

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Stage(nn.Module):
    def __init__(self, c=32):
        super().__init__()
        self.block = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c), nn.ReLU())

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)  # expect: CKPT010

def init_bn(m):
    if isinstance(m, nn.BatchNorm2d):
        nn.init.ones_(m.weight)

def train(loader):
    stage = nn.SyncBatchNorm.convert_sync_batchnorm(Stage())
    stage.apply(init_bn)
    for x in loader:
        stage(x).mean().backward()
