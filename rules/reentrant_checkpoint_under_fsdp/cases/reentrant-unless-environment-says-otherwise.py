# Reentrant unless the environment says otherwise.
# ckptlint-case: column=9
# ckptlint-case: message-contains=`USE_REENTRANT` read from the environment, `USE_REENTRANT` unset

import os
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.utils.checkpoint import checkpoint

USE_REENTRANT = os.environ.get("USE_REENTRANT", "true").lower() in ("1", "true")
FAST_PATH_REENTRANT = bool(int(os.getenv("FAST_PATH_REENTRANT", "0")))

def block(layer, x):
    x = checkpoint(layer, x, use_reentrant=USE_REENTRANT)  # expect: CKPT002
    return checkpoint(layer, x, use_reentrant=FAST_PATH_REENTRANT)

model = FSDP(model, auto_wrap_policy=policy)
