# diffusers' `_gradient_checkpointing_func(module, *args)` takes no keywords at all.
# ckptlint-case: column=33
# ckptlint-case: message-contains=which diffusers' `ModelMixin.enable_gradient_checkpointing` defines as `(module, *args)`

import torch
from diffusers import ModelMixin

class VideoTransformer(ModelMixin):
    _supports_gradient_checkpointing = True

    def forward(self, hidden_states, kv_cache):
        for index, block in enumerate(self.blocks):
            if torch.is_grad_enabled() and self.gradient_checkpointing:
                hidden_states = self._gradient_checkpointing_func(block, hidden_states, kv_cache=kv_cache[index])  # expect: CKPT032
            else:
                hidden_states = block(hidden_states, kv_cache=kv_cache[index])
        return hidden_states
