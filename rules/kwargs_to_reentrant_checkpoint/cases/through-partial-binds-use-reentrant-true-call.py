# Through a partial that binds use_reentrant=True: the call's keyword overrides it.
# ckptlint-case: column=5

from functools import partial
from torch.utils.checkpoint import checkpoint
ckpt = partial(checkpoint, use_reentrant=True)
y = ckpt(block, x, mask=mask)  # expect: CKPT032
