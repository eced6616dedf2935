# timm's `checkpoint_seq` recomputes every member of the project's container.
# ckptlint-case: column=16
# ckptlint-case: message-contains=`checkpoint_seq` recomputes a region holding modules with running statistics (Stem.blocks

import torch.nn as nn
from timm.models import checkpoint_seq

class Stem(nn.Module):
    def __init__(self, channels, norm_layer=nn.BatchNorm2d):
        super().__init__()
        self.blocks = nn.Sequential(nn.Conv2d(channels, channels, 3), norm_layer(channels), nn.ReLU())

    def forward(self, x):
        return checkpoint_seq(self.blocks, x, every=2)  # expect: CKPT010
