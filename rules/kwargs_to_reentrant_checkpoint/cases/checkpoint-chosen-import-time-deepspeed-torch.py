# `checkpoint` chosen at import time (DeepSpeed's or torch's): where torch's, a tuple lands in a slot.
# `checkpoint` chosen at import time (DeepSpeed's or torch's): where it is torch's, the
# packed tuple lands in `rel_pos_bias` as a tuple.
# ckptlint-case: column=21
# ckptlint-case: message-contains=`(rel_pos_bias,)` is passed positionally into parameter `rel_pos_bias` of `forward`: one tuple

import os
import torch.nn as nn

if os.getenv("ENV_TYPE") == "deepspeed":
    from deepspeed.runtime.activation_checkpointing.checkpointing import checkpoint
else:
    from torch.utils.checkpoint import checkpoint

class Block(nn.Module):
    def forward(self, x, rel_pos_bias=None):
        return x

class Encoder(nn.Module):
    def __init__(self, depth, plain_layers=0):
        super().__init__()
        self.plain_layers = plain_layers
        self.blocks = nn.ModuleList()
        for _ in range(depth):
            self.blocks.append(Block())

    def forward(self, x, rel_pos_bias=None):
        checkpointed = self.grad_checkpointing and self.training
        for index, blk in enumerate(self.blocks):
            if index < self.plain_layers or not checkpointed:
                x = blk(x, rel_pos_bias=rel_pos_bias)
            else:
                x = checkpoint(blk, x, (rel_pos_bias,))  # expect: CKPT032
        return x
