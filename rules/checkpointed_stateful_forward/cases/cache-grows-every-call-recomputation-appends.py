# A cache that grows with every call: the recomputation appends the same keys again.
# ckptlint-case: column=16
# ckptlint-case: message-contains=`self.keys` assigned (line 16)

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Memory(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.keys = torch.zeros(0, 8)

    def forward(self, x):
        self.keys = torch.cat([self.keys, x.detach()])
        return self.fc(x)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.memory = Memory()

    def forward(self, x):
        return checkpoint(self.memory, x, use_reentrant=False)  # expect: CKPT011
