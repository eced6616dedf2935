# A block parameter annotated with its class, nothing passing it: an instance of it.
# ckptlint-case: column=12

import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.fc(x))

def wrap(block: Block):
    return checkpoint_wrapper(block, preserve_rng_state=False)  # expect: CKPT033
