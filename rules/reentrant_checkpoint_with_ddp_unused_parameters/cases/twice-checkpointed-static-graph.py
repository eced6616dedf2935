# `static_graph=True`: DDP knows each parameter's hook fires once per reentrant backward
# and the shared block trains (measured): not reported.
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class TiedEncoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.block = nn.Linear(dim, dim)

    def forward(self, x):
        for _ in range(3):
            x = checkpoint(self.block, x, use_reentrant=True)
        return x


model = DDP(TiedEncoder().cuda(), device_ids=[0], static_graph=True)
