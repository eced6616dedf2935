# A counter under a check on itself still moves twice.
# ckptlint-case: column=16
# ckptlint-case: message-contains=`self.steps` assigned (line 16)

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Warmup(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.steps = 0

    def forward(self, x):
        if self.steps < 100:
            self.steps = self.steps + 1
        return self.fc(x)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.warm = Warmup()

    def forward(self, x):
        return checkpoint(self.warm, x, use_reentrant=False)  # expect: CKPT011
