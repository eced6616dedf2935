# Activation statistics logged into a module-level list (and one of another module).
# ckptlint-case: column=17
# ckptlint-case: message-contains=Block.forward: `ACT_NORMS.append(...)` on a module-level list

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

ACT_NORMS = []

class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        ACT_NORMS.append(x.detach().norm().item())
        return x + self.fc(x).relu()

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = checkpoint(b, x, use_reentrant=False)  # expect: CKPT011
        return x
