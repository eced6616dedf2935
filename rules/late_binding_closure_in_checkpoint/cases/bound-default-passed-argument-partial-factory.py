# Bound as a default; passed as an argument; a partial; a factory.

import functools
from torch.utils.checkpoint import checkpoint

def forward(self, x, mask):
    for block in self.blocks:
        x = checkpoint(lambda t, block=block: block(t, mask), x, use_reentrant=False)
    for block in self.blocks:
        x = checkpoint(block, x, mask, use_reentrant=False)
    for block in self.blocks:
        x = checkpoint(functools.partial(block, mask=mask), x, use_reentrant=False)
    for block in self.blocks:
        x = checkpoint(create_custom_forward(block), x, use_reentrant=False)
    return x
