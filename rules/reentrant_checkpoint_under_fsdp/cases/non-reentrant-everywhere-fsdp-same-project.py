# Non-reentrant everywhere, FSDP in the same project.

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.utils.checkpoint import checkpoint

def forward(self, x):
    return checkpoint(self.block, x, use_reentrant=False)

model = FSDP(Model())
