# The helper's callers choose: the flag passed through, positional inputs, a keyword it binds itself.
# The helper's callers choose: `use_reentrant=False` passed through, inputs passed by
# position, a keyword the helper binds itself; a helper that sets the flag.

import torch
import torch.nn as nn

def run(func, enable, *args, **kwargs):
    if enable:
        return torch.utils.checkpoint.checkpoint(func, *args, **kwargs)
    return func(*args, **kwargs)

def run_flat(func, *args, **kwargs):
    return torch.utils.checkpoint.checkpoint(func, *args, use_reentrant=False, **kwargs)

class Block(nn.Module):
    def __init__(self, attn):
        super().__init__()
        self.attn = attn

    def forward(self, x, mask):
        x = run(self.attn, self.training, x, attention_mask=mask, use_reentrant=False)
        x = run(self.attn, self.training, x, mask)
        x = run(self.attn, enable=self.training, *(x, mask))
        return run_flat(self.attn, x, attention_mask=mask)
