# Through the project's own wrapper (in any file; here the same one).
# ckptlint-case: column=13

import torch.utils.checkpoint as cp

def run_checkpointed(function, *inputs):
    return cp.checkpoint(function, *inputs, use_reentrant=False)

def forward(self, x):
    for block in self.blocks:
        x = run_checkpointed(lambda t: block(t), x)  # expect: CKPT030
    return x
