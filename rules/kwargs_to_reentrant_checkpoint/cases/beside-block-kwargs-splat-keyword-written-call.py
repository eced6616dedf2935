# Beside a `**block_kwargs` splat, a keyword written at the call is still one.
# ckptlint-case: column=33
# ckptlint-case: message-contains=keyword argument `kv_cache` passed to `_gradient_checkpointing_func`

import torch
from diffusers.models.modeling_utils import ModelMixin

class AnimateTransformer(ModelMixin):
    def forward(self, hidden_states, kv_cache, block_kwargs):
        for index, block in enumerate(self.blocks):
            if torch.is_grad_enabled() and self.gradient_checkpointing:
                hidden_states = self._gradient_checkpointing_func(  # expect: CKPT032
                    block, hidden_states, kv_cache=kv_cache.get(index), **block_kwargs
                )
        return hidden_states
