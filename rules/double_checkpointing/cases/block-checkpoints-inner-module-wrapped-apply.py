# A block that checkpoints its inner module, wrapped by `apply_activation_checkpointing`.
# ckptlint-case: target-version=torch=2.13
# ckptlint-case: column=16
# ckptlint-case: message-contains=by `apply_activation_checkpointing` at example.py:14

import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

class Block(nn.Module):
    def forward(self, x):
        return checkpoint(self.inner, x, use_reentrant=True)  # expect: CKPT005

apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, Block))
