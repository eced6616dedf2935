# A partial without it, but every call through it passes the flag.

from functools import partial
from torch.utils.checkpoint import checkpoint

ckpt = partial(checkpoint, preserve_rng_state=False)

def forward(self, x):
    return ckpt(self.block, x, use_reentrant=False)
