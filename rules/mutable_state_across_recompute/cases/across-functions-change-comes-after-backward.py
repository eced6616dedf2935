# Across functions: the change comes after backward, or touches nothing the region reads.

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.scale = 1.0

    def _scaled(self, x, opts):
        return self.fc(x) * opts["t"] * self.scale

    def forward(self, x, opts, log):
        return checkpoint(self._scaled, x, opts, use_reentrant=False)

def train(loader):
    net, opts, log = Net(), {"t": 1.0}, {}
    for x in loader:
        loss = net(x, opts, log).sum()
        log["loss"] = loss.item()
        net.name = "warm"
        loss.backward()
        opts["t"] *= 0.99
        net.scale = 0.5
