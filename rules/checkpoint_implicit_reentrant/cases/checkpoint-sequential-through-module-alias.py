# `checkpoint_sequential` through a module alias (`import torch.utils.checkpoint as cp`).
# ckptlint-case: column=5
# ckptlint-case: message-contains=checkpoint_sequential

import torch.utils.checkpoint as cp
y = cp.checkpoint_sequential(layers, 2, x)  # expect: CKPT001
