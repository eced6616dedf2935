# A generic helper's parameter decides it: the project passes False.
# ckptlint-case: column=5
# ckptlint-case: message-contains=`preserve_rng_state=preserve_rng`, False as passed at example.py:26

from functools import partial

import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing, checkpoint_wrapper,
)

class ConvModule(nn.Module):
    def __init__(self, d, p=0.1):
        super().__init__()
        self.pw = nn.Linear(d, d)
        self.p = p

    def forward(self, x):
        return self.pw(F.dropout(F.silu(x), self.p, self.training))

def enable_ac(model, layer_cls, preserve_rng=True):
    wrapper = partial(checkpoint_wrapper, preserve_rng_state=preserve_rng)
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=wrapper, check_fn=lambda m: isinstance(m, layer_cls))  # expect: CKPT033

enable_ac(nn.Sequential(ConvModule(8), ConvModule(8)), ConvModule, preserve_rng=False)
