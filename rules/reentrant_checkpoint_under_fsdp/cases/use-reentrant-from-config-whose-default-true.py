# `use_reentrant` from a config whose default is True.
# ckptlint-case: column=12
# ckptlint-case: message-contains=whose default is True: `TrainConfig.use_reentrant` at 

from dataclasses import dataclass, field
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.utils.checkpoint import checkpoint

@dataclass
class TrainConfig:
    use_reentrant: bool = field(default=True)

def forward(self, x, cfg: TrainConfig):
    return checkpoint(self.block, x, use_reentrant=cfg.use_reentrant)  # expect: CKPT002

model = FSDP(Model())
