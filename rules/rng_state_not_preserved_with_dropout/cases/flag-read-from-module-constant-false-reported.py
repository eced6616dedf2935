# The flag read from a module constant that is False: reported, without a fix.
# The flag read from a module constant that is False: reported, without a fix (the
# knob is the project's to keep).
# ckptlint-case: column=16
# ckptlint-case: message-contains=`preserve_rng_state=PRESERVE_RNG`, `PRESERVE_RNG = False` at 

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

PRESERVE_RNG = False

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.1))

    def forward(self, x):
        return checkpoint(self.mlp, x, use_reentrant=False, preserve_rng_state=PRESERVE_RNG)  # expect: CKPT033
