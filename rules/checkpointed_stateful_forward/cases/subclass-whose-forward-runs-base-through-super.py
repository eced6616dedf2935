# A subclass whose forward runs its base's through `super()`: the base's router writes.
# ckptlint-case: column=30
# ckptlint-case: message-contains=NormedMoEBlock.router -> Router.forward: `self.seen` assigned

import torch
import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

class Router(nn.Module):
    def __init__(self, d=16, experts=4):
        super().__init__()
        self.gate = nn.Linear(d, experts)
        self.register_buffer("seen", torch.zeros(experts))

    def forward(self, x):
        scores = self.gate(x).softmax(-1)
        self.seen += scores.detach().sum(0)
        return scores

class MoEBlock(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.router = Router(d)

    def forward(self, x):
        return x * self.router(x).sum(-1, keepdim=True)

class NormedMoEBlock(MoEBlock):
    def __init__(self, d=16):
        super().__init__(d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return super().forward(self.norm(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([NormedMoEBlock(), NormedMoEBlock()])

    def apply_checkpointing(self):
        for i, block in enumerate(self.blocks):
            self.blocks[i] = checkpoint_wrapper(block)  # expect: CKPT011
