# `from numpy import random`: its `choice` in a checkpointed method.
# ckptlint-case: column=16
from numpy import random
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Mixer(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = nn.ModuleList([nn.Linear(dim, dim) for _ in range(heads)])

    def _mix(self, x):
        head = self.heads[int(random.choice(len(self.heads)))]
        return head(x)

    def forward(self, x):
        return checkpoint(self._mix, x, use_reentrant=False)  # expect: CKPT036
