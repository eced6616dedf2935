# An MoE router with a usage counter, checkpointed from the block that owns it.
# ckptlint-case: column=16
# ckptlint-case: message-contains=MoE.router -> Router.forward: `self.usage.add_(...)` (line 16)

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Router(nn.Module):
    def __init__(self, experts):
        super().__init__()
        self.gate = nn.Linear(8, experts)
        self.register_buffer("usage", None)

    def forward(self, x):
        weights = self.gate(x).softmax(-1)
        self.usage.add_(weights.sum(0).detach())
        return weights

class MoE(nn.Module):
    def __init__(self, experts):
        super().__init__()
        self.router = Router(experts)

    def forward(self, x):
        return checkpoint(self.router, x, use_reentrant=False)  # expect: CKPT011
