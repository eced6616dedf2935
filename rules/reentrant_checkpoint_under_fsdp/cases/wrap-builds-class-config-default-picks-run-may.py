# The wrap builds the class a config default picks; a run may pick a subclass that checkpoints reentrant.
# The wrap builds the class a config default picks from a table; a run may pick the
# subclass, whose own forward checkpoints reentrant.
# ckptlint-case: column=17

from dataclasses import dataclass
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.utils.checkpoint import checkpoint

class VisionTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(8, 8) for _ in range(4))

class ViTWithRegisters(VisionTransformer):
    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True)  # expect: CKPT002
        return x

@dataclass
class TrainConfig:
    arch: str = "vit_base"

ARCHS = {"vit_base": VisionTransformer, "vit_reg": ViTWithRegisters}

def build(cfg=TrainConfig()):
    return FSDP(ARCHS[cfg.arch]())
