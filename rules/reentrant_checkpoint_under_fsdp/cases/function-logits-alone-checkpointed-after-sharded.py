# A function of the logits alone, checkpointed after the sharded model's forward.
# A function of the logits alone, checkpointed after the sharded model's forward: no
# FSDP unit and no parameter in its recomputation (CKPT001's, not this rule's).

import torch
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.utils.checkpoint import checkpoint

def entropy_from_logits(logits):
    probabilities = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (probabilities * logits).sum(-1)

def forward_micro_batch(module, batch):
    logits = module(**batch).logits
    return logits, checkpoint(entropy_from_logits, logits)

def build(module, policy):
    return FSDP(module, auto_wrap_policy=policy)
