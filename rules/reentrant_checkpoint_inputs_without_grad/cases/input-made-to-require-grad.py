# The input is made to require grad before the reentrant call (the documented workaround).
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3)
        self.embed = nn.Embedding(10, 16)
        self.embed.requires_grad_(False)
        self.block = nn.Linear(16, 16)

    def forward(self, pixel_values, ids):
        pixel_values.requires_grad_()
        h = checkpoint(self.stem, pixel_values, use_reentrant=True)
        e = self.embed(ids)
        e.requires_grad = True
        return h, checkpoint(self.block, e, use_reentrant=True)


model = Net()
