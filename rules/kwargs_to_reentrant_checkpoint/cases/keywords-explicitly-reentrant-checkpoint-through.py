# Keywords to an explicitly reentrant checkpoint through a module alias.
# ckptlint-case: column=5
# ckptlint-case: message-contains=Unexpected keyword arguments: bias,scale

import torch.utils.checkpoint as cp
y = cp.checkpoint(f, x, use_reentrant=True, scale=2.0, bias=b)  # expect: CKPT032
