# An explicit `use_reentrant=True` in a project that wraps with FSDP1.
# ckptlint-case: column=12

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.utils.checkpoint import checkpoint

def forward(self, x):
    return checkpoint(self.block, x, use_reentrant=True)  # expect: CKPT002

model = FSDP(Model())
