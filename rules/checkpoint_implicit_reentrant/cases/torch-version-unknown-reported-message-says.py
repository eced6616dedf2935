# Torch version unknown: reported, and the message says which versions are affected.
# ckptlint-case: column=5
# ckptlint-case: message-contains=`checkpoint` without `use_reentrant`

import torch
y = torch.utils.checkpoint.checkpoint(block, x)  # expect: CKPT001
