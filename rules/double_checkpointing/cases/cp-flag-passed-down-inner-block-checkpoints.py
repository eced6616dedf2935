# The `with_cp` flag passed down: the inner block checkpoints inside the outer region.
# The `with_cp` flag passed down: the inner block checkpoints (reentrant, torch's
# default) inside the outer region.
# ckptlint-case: target-version=torch=2.13
# ckptlint-case: column=20
# ckptlint-case: message-contains=Context.forward: `checkpoint` at example.py:19, reentrant

import torch.utils.checkpoint as cp
from torch import nn

class Context(nn.Module):
    def __init__(self, channels, with_cp=False):
        super().__init__()
        self.fc = nn.Linear(channels, channels)
        self.with_cp = with_cp

    def forward(self, x):
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(self.fc, x)
        return self.fc(x)

class Block(nn.Module):
    def __init__(self, channels, with_cp=False):
        super().__init__()
        self.conv = nn.Linear(channels, channels)
        self.context = Context(channels, with_cp=with_cp)
        self.with_cp = with_cp

    def forward(self, x):
        if self.with_cp and x.requires_grad:
            return cp.checkpoint(lambda t: self.context(self.conv(t)), x, use_reentrant=False)  # expect: CKPT005
        return self.context(self.conv(x))
