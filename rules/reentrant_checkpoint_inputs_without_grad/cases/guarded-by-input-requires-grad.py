# mmcv's guard: checkpoint only when the input requires grad (`if self.with_cp and x.requires_grad:`).
import torch.nn as nn
import torch.utils.checkpoint as cp


class Backbone(nn.Module):
    def __init__(self, with_cp=True):
        super().__init__()
        self.with_cp = with_cp
        self.conv1 = nn.Conv2d(3, 64, 3)

    def forward(self, x):
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self.conv1, x)
        return self.conv1(x)


backbone = Backbone()
