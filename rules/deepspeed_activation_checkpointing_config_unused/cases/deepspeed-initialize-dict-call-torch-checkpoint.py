# `dict(...)` handed to `deepspeed.initialize` while the blocks checkpoint with torch's checkpoint: the section is inert.
# ckptlint-case: column=5
import deepspeed
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=False)
        return x


config = dict(
    train_batch_size=32,
    steps_per_print=100,
    activation_checkpointing=dict(cpu_checkpointing=True, profile=False),  # expect: CKPT008
)


def build(blocks):
    engine, optimizer, _, _ = deepspeed.initialize(model=Net(blocks), config=config)
    return engine
