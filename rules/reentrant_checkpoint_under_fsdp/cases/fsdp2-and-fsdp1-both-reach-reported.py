# Both FSDP versions reach the checkpoint (a `--fsdp1` switch): FSDP1's harm holds, reported.
# ckptlint-case: column=5

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, fully_shard

y = torch.utils.checkpoint.checkpoint(block, x)  # expect: CKPT002
if args.fsdp1:
    model = FSDP(model)
else:
    fully_shard(model)
