# `static_graph=True` makes reentrant checkpointing work under DDP (measured): not reported.
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(32, 32) for _ in range(8))

    def forward(self, x):
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=True)
        return x


model = DDP(Net().cuda(), device_ids=[0], find_unused_parameters=True, static_graph=True)
