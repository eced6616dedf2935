# A flag the checkpointed method reads, flipped later in the same forward.
# ckptlint-case: column=13
# ckptlint-case: message-contains=`self.causal`

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Block(nn.Module):
    def _attend(self, x):
        return self.attn(x, causal=self.causal)

    def forward(self, x):
        x = checkpoint(self._attend, x, use_reentrant=False)  # expect: CKPT031
        self.causal = False
        return x
