# An assigned alias.
# ckptlint-case: column=5

import torch
run = torch.utils.checkpoint.checkpoint
y = run(block, x)  # expect: CKPT001
