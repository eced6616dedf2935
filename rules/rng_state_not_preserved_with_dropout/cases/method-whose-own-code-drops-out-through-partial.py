# A method whose own code drops out, through a partial (litgpt-style LoRA block).
# ckptlint-case: column=31

import functools
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

ckpt = functools.partial(checkpoint, use_reentrant=False, preserve_rng_state=False)

class LoRALinear(nn.Module):
    def _lora(self, x):
        return self.B(self.A(F.dropout(x, p=self.dropout, training=self.training)))

    def forward(self, x):
        return self.base(x) + ckpt(self._lora, x)  # expect: CKPT033
