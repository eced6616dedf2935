# Multi-line call with a trailing comma: the new argument gets its own line.
# ckptlint-case: column=14

import torch

def forward(self, hidden, mask):
    hidden = torch.utils.checkpoint.checkpoint(  # expect: CKPT001
        self.layer,
        hidden,  # the residual stream
        mask,
    )
    return hidden
