# `use_reentrant` from an argument or from `**kwargs`: not known statically, not reported.
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self, use_reentrant, **ckpt_kwargs):
        super().__init__()
        self.use_reentrant = use_reentrant
        self.ckpt_kwargs = ckpt_kwargs
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x):
        x = checkpoint(self.a, x, use_reentrant=self.use_reentrant)
        return checkpoint(self.b, x, **self.ckpt_kwargs)


def wrap(model):
    return DDP(model, find_unused_parameters=True)
