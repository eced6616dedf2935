# Through accelerate-style `apply_activation_checkpointing` with a partial bound to a name.
# ckptlint-case: message-contains=DecoderLayer.dropout -> (torch.nn.Dropout)

import functools
import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
    checkpoint_wrapper,
)

class DecoderLayer(nn.Module):
    def __init__(self):
        super().__init__()
        self.mlp = nn.Linear(8, 8)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.mlp(x))

no_rng = functools.partial(checkpoint_wrapper, preserve_rng_state=False)
apply_activation_checkpointing(model, checkpoint_wrapper_fn=no_rng, check_fn=lambda m: isinstance(m, DecoderLayer))  # expect: CKPT033
