# A partial that binds it.

import functools
import torch

ckpt = functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)

def forward(self, x):
    return ckpt(self.block, x)
