# The class's own checkpoint helper, inherited from its base, given a lambda over the loop's block.
# The class's own checkpoint helper, inherited from its base: the lambda runs again
# in backward all the same.
# ckptlint-case: column=17

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Checkpointed(nn.Module):
    def _ckpt(self, fn, x):
        return checkpoint(fn, x, use_reentrant=False)

class Net(Checkpointed):
    def forward(self, x):
        for layer in self.layers:
            x = self._ckpt(lambda y: layer(y), x)  # expect: CKPT030
        return x
