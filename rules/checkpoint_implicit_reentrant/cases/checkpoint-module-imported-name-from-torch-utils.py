# The checkpoint module imported as a name (`from torch.utils import checkpoint as m`).
# ckptlint-case: column=5

from torch.utils import checkpoint as m
y = m.checkpoint(block, x, preserve_rng_state=False)  # expect: CKPT001
