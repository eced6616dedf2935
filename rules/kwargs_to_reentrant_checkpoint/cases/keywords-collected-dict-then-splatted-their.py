# The keywords collected with `dict(...)`, then splatted: their names are known.
# ckptlint-case: column=12
# ckptlint-case: message-contains=keyword arguments `attention_mask`, `position_ids`

import torch.utils.checkpoint as cp

def run_layer(layer, h, mask, pos):
    kw = dict(attention_mask=mask, position_ids=pos)
    return cp.checkpoint(layer, h, use_reentrant=True, **kw)  # expect: CKPT032
