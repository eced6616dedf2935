# A comprehension's target is each element of what it iterates (FSDP2-style `parallelize`).
# A comprehension's target is each element of what it iterates (an FSDP2-style
# `parallelize` rebuilding the block list).
# ckptlint-case: column=35
# ckptlint-case: message-contains=(model.blocks (as passed at example.py:18) -> (torch.nn.BatchNorm2d))

import torch.nn as nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Sequential(nn.Conv2d(8, 8, 3), nn.BatchNorm2d(8)) for _ in range(4))

def parallelize(model):
    model.blocks = nn.ModuleList([checkpoint_wrapper(block) for block in model.blocks])  # expect: CKPT010

parallelize(Net())
