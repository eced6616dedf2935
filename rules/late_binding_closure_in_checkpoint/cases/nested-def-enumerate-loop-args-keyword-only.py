# A nested def in an enumerate loop, with *args: keyword-only defaults.
# ckptlint-case: column=18

import torch.utils.checkpoint as cp

def forward(self, hidden):
    for i, layer in enumerate(self.layers):
        def custom_forward(*inputs):
            return layer(*inputs, index=i)
        hidden = cp.checkpoint(custom_forward, hidden, use_reentrant=False)  # expect: CKPT030
    return hidden
