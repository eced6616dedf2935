# Explicit `use_reentrant=True` in a model wrapped by DDP with `find_unused_parameters=True`.
# ckptlint-case: column=17
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint


class Encoder(nn.Module):
    def __init__(self, dim=64, depth=4):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(dim, dim) for _ in range(depth))
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True)  # expect: CKPT006
        return self.head(x)


def main(rank):
    model = Encoder().to(rank)
    model = DistributedDataParallel(model, device_ids=[rank], find_unused_parameters=True)
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
