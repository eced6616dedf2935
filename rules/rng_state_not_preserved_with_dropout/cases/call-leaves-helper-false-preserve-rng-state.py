# A call leaves a helper's False `preserve_rng_state` default in place (lingua / torchtune-style AC helpers).
# ckptlint-case: column=37
# ckptlint-case: message-contains=False by default, as called at

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
        model.register_module(name, checkpoint_wrapper(block, preserve_rng_state=preserve_rng))  # expect: CKPT033
    return model

model = apply_ac(nn.Sequential(Block(), Block()))
