# `x.bernoulli_(p, generator=g)` in a block wrapped with `checkpoint_wrapper`.
# ckptlint-case: column=12
import torch
import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

GEN = torch.Generator()


class DropPath(nn.Module):
    def __init__(self, p):
        super().__init__()
        self.p = p
        self.lin = nn.Linear(8, 8)

    def forward(self, x):
        keep = x.new_empty(x.shape[0], 1).bernoulli_(1 - self.p, generator=GEN)
        return self.lin(x) * keep / (1 - self.p)


def build():
    return checkpoint_wrapper(DropPath(0.1))  # expect: CKPT036
