# `checkpoint_sequential`: a BatchNorm in an earlier segment is recomputed.
# ckptlint-case: column=16
# ckptlint-case: message-contains=Stem.layers -> (torch.nn.BatchNorm2d)

import torch.nn as nn
from torch.utils.checkpoint import checkpoint_sequential

class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 8, 3))

    def forward(self, x):
        return checkpoint_sequential(self.layers, 2, x, use_reentrant=False)  # expect: CKPT010
