# `checkpoint_wrapper(Block(...), preserve_rng_state=False)`.
# ckptlint-case: column=25

import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.2)

    def forward(self, x):
        return self.drop(x)

layers = nn.ModuleList([checkpoint_wrapper(Block(), preserve_rng_state=False) for _ in range(4)])  # expect: CKPT033
