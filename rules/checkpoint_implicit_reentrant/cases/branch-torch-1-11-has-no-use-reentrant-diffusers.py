# The branch for torch < 1.11, which has no `use_reentrant` (diffusers' models).

import torch
from packaging import version
from torch.utils.checkpoint import checkpoint
from diffusers.utils import is_torch_version

def run(blocks, x):
    if is_torch_version(">=", "1.11.0"):
        for block in blocks:
            x = checkpoint(block, x, use_reentrant=False)
    else:
        for block in blocks:
            x = checkpoint(block, x)
    if version.parse(torch.__version__) < version.parse("1.11"):
        x = checkpoint(blocks[0], x)
    return x
