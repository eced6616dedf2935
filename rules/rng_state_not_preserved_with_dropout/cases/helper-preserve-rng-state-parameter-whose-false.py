# A helper's `preserve_rng_state` parameter whose False default no call leaves in place.

import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

class Block(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.drop = nn.Dropout(0.1)

    def forward(self, x):
        return x + self.drop(self.fc(x))

def apply_ac(model, preserve_rng=False):
    for name, block in list(model.named_children()):
        model.register_module(name, checkpoint_wrapper(block, preserve_rng_state=preserve_rng))
    return model

model = apply_ac(nn.Sequential(Block(), Block()), preserve_rng=True)
