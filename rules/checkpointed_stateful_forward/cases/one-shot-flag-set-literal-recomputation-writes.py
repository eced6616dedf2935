# A one-shot flag set to a literal: the recomputation writes the same value.
# A one-shot flag set to a literal: the recomputation writes the same value (only a
# print is skipped the second time).

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Expert(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)
        self._announced = False

    def _run(self, x):
        if not self._announced:
            print("checkpointing the expert")
            self._announced = True
        self.cache = None
        return self.proj(x)

    def forward(self, x):
        return checkpoint(self._run, x, use_reentrant=False)
