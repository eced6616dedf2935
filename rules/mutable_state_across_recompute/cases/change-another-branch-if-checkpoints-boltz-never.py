# The change is in another branch of the `if` that checkpoints (boltz): never both.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Model(nn.Module):
    def __init__(self, cond):
        super().__init__()
        self.cond = cond
        self.run_structure = True

    def forward(self, s, feats):
        if self.run_structure:
            out = checkpoint(self.cond, s, feats, use_reentrant=False)
        elif self.training:
            feats["coords"] = feats["coords"].squeeze(1)
            out = s
        return out
