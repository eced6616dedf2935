# `import random as rnd`: the blocks' order shuffled inside a checkpointed function.
# ckptlint-case: column=16
import random as rnd

import torch.nn as nn
from torch.utils.checkpoint import checkpoint


def run_shuffled(blocks, x):
    order = list(range(len(blocks)))
    rnd.shuffle(order)
    for i in order:
        x = blocks[i](x)
    return x


class Stage(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(3)])

    def forward(self, x):
        return checkpoint(run_shuffled, self.blocks, x, use_reentrant=False)  # expect: CKPT036
