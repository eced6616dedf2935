# Across functions: the training loop changes a flag of the checkpointed block before backward.
# Across functions: the training loop changes a flag of the checkpointed block
# between the forward and backward (reported at the change).
# ckptlint-case: column=9
# ckptlint-case: message-contains=`net.block.use_gelu` is reassigned after `net(...)` (line 31) and before backward (line 33)

import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.use_gelu = True

    def forward(self, x):
        return F.gelu(self.fc(x)) if self.use_gelu else F.relu(self.fc(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=False)

def train(loader):
    net = Net()
    for step, x in enumerate(loader):
        loss = net(x).sum()
        net.block.use_gelu = step < 100  # expect: CKPT031
        loss.backward()
