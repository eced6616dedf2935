# A version check the other way round: the body runs on torch >= 1.11 too.
# ckptlint-case: column=17

import torch
from torch.utils.checkpoint import checkpoint
from diffusers.utils import is_torch_version

def run(blocks, x):
    if is_torch_version("<", "2.0"):
        for block in blocks:
            x = checkpoint(block, x)  # expect: CKPT001
    return x
