# A block whose weights are shared, checkpointed twice in one forward (reentrant, torch's
# default), under plain DDP: the second recomputation marks its parameters ready again
# (measured: "Parameter at index 3 with name block.0.bias has been marked as ready twice").
import torch
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.checkpoint import checkpoint


class TiedEncoder(nn.Module):
    def __init__(self, dim=64):
        super().__init__()
        self.embed = nn.Linear(dim, dim)
        self.block = nn.Sequential(nn.Linear(dim, dim), nn.GELU())
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        x = self.embed(x)
        x = checkpoint(self.block, x, use_reentrant=True)  # expect: CKPT006
        x = checkpoint(self.block, x, use_reentrant=True)  # expect: CKPT006
        return self.head(x)


def main(rank, loader):
    model = DistributedDataParallel(TiedEncoder().to(rank), device_ids=[rank])
    optimizer = torch.optim.AdamW(model.parameters())
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
