# Only the discriminator has `find_unused_parameters=True`; the checkpointed generator is wrapped without it.
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Conv2d(64, 64, 3, padding=1) for _ in range(8))

    def forward(self, z):
        for block in self.blocks:
            z = checkpoint(block, z, use_reentrant=True)
        return z


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 64, 4), nn.LeakyReLU(0.2))
        self.aux = nn.Linear(64, 10)

    def forward(self, x):
        return self.features(x)


def build(rank):
    generator = DDP(Generator().to(rank), device_ids=[rank])
    discriminator = DDP(Discriminator().to(rank), device_ids=[rank], find_unused_parameters=True)
    return generator, discriminator
