# A local factory's inner function takes only *inputs (diffusers issue 11214).
# ckptlint-case: column=12
# ckptlint-case: message-contains=`encoder_hidden_states` passed through `checkpoint` to `custom_forward(*inputs)`

import torch.utils.checkpoint

def create_custom_forward(module):
    def custom_forward(*inputs):
        return module(*inputs)
    return custom_forward

def forward(self, hidden, context):
    return torch.utils.checkpoint.checkpoint(  # expect: CKPT032
        create_custom_forward(self.attn), hidden, encoder_hidden_states=context, use_reentrant=False
    )
