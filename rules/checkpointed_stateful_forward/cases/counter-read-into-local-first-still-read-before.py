# A counter read into a local first: still read before it is written.
# ckptlint-case: column=16
# ckptlint-case: message-contains=`self.calls` assigned (line 16)

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Scheduled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x):
        calls = self.calls
        self.calls = calls + 1
        return self.fc(x)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Scheduled()

    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=False)  # expect: CKPT011
