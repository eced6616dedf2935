# Under plain DDP, none of these runs one module's reentrant checkpoint twice in a forward:
# each block of a list once, the two arms of an `if` (or two `if`s whose tests contradict),
# a loop that runs once, a training loop
# (each iteration is a forward and backward of its own), non-reentrant calls, and a block
# checkpointed twice in a model that `static_graph=True` wraps (see the static-graph case).
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint


class Stack(nn.Module):
    def __init__(self, dim=64, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
        self.block = nn.Linear(dim, dim)
        self.refine = nn.Linear(dim, dim)
        self.tail = nn.Linear(dim, dim)
        self.tied = True

    def forward(self, x, fast=False):
        for i in range(len(self.blocks)):
            x = checkpoint(self.blocks[i], x, use_reentrant=True)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True)
        if fast:
            x = checkpoint(self.block, x, use_reentrant=True)
        else:
            x = checkpoint(self.block, x, use_reentrant=True)
        if self.tied:
            x = checkpoint(self.tail, x, use_reentrant=True)
        if not self.tied:
            x = checkpoint(self.tail, x, use_reentrant=True)
        for _ in range(1):
            x = checkpoint(self.refine, x, use_reentrant=True)
        x = checkpoint(self.refine, x, use_reentrant=False)
        x = checkpoint(self.refine, x, use_reentrant=False)
        return x

    def fit(self, loader, optimizer):
        for x in loader:
            loss = checkpoint(self.refine, x, use_reentrant=True).sum()
            loss.backward()
            optimizer.step()


def main(rank):
    model = DistributedDataParallel(Stack().to(rank), device_ids=[rank])
    return model
