# A partial without the flag is reported where it is built; the fix goes there.
# ckptlint-case: column=21

from functools import partial
from torch.utils.checkpoint import checkpoint

class Model:
    def __init__(self):
        self.ckpt = partial(checkpoint, preserve_rng_state=True)  # expect: CKPT001

    def forward(self, x):
        return self.ckpt(self.block, x)
