# Omitted: torch's default is reentrant. Reported instead of CKPT001.
# ckptlint-case: column=5

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

y = torch.utils.checkpoint.checkpoint(block, x)  # expect: CKPT002
model = FSDP(model)
