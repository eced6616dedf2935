# A class wrapped by apply_activation_checkpointing(check_fn=...).
# ckptlint-case: message-contains=Bottleneck.bn -> (torch.nn.BatchNorm2d)

import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

class Bottleneck(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 1)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return self.bn(self.conv(x))

apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Bottleneck))  # expect: CKPT010
