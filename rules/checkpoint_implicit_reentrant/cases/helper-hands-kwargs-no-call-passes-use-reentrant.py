# A helper that hands its `**kwargs` on, and no call of it passes `use_reentrant`.
# ckptlint-case: column=16
# ckptlint-case: message-contains=no call of `auto_grad_checkpoint` in the project passes `use_reentrant`

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

def auto_grad_checkpoint(module, *args, **kwargs):
    if getattr(module, "grad_checkpointing", False):
        return checkpoint(module, *args, **kwargs)  # expect: CKPT001
    return module(*args, **kwargs)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])

    def forward(self, x, y):
        for block in self.blocks:
            x = auto_grad_checkpoint(block, x)
        return auto_grad_checkpoint(self.blocks[0], y)
