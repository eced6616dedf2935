# The flag does not exist before torch 1.11.
# ckptlint-case: target-version=torch=1.10

from torch.utils.checkpoint import checkpoint
y = checkpoint(block, x)
