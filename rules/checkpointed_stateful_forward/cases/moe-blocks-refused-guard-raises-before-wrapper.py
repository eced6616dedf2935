# MoE blocks refused by a guard that raises before the wrapper (OLMo-core): only dense blocks wrapped.
# MoE blocks refused by a guard that raises before the wrapper (OLMo-core): only the
# dense blocks, which write nothing, are wrapped.

import torch
import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

class MoEBlock(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.gate = nn.Linear(d, 4)
        self.register_buffer("seen", torch.zeros(4))

    def forward(self, x):
        self.seen += self.gate(x).softmax(-1).detach().sum(0)
        return x

class SharedMoEBlock(MoEBlock):
    pass

class DenseBlock(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.fc = nn.Linear(d, d)

    def forward(self, x):
        return x + self.fc(x)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([DenseBlock(), SharedMoEBlock()])

    def apply_checkpointing(self):
        for i, block in enumerate(self.blocks):
            if isinstance(block, MoEBlock):
                raise ValueError("MoE blocks cannot be checkpointed")
            self.blocks[i] = checkpoint_wrapper(block)
