# A module-level function checkpointed on its own: its dropout draws a new mask.
# ckptlint-case: column=12
# ckptlint-case: message-contains=attn_core: `dropout` (line 11)

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

def attn_core(q, k, v, p_drop):
    probs = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
    probs = F.dropout(probs, p=p_drop, training=True)
    return probs @ v

def attention(q, k, v):
    return checkpoint(attn_core, q, k, v, 0.1, use_reentrant=False, preserve_rng_state=False)  # expect: CKPT033
