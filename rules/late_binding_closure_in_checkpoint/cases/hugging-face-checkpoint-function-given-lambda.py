# Hugging Face's checkpoint function given a lambda over the loop's layer, in a model's own code.
# Hugging Face's checkpoint (set by `gradient_checkpointing_enable()`) given a lambda
# over the loop's layer, in a model's own code.
# ckptlint-case: column=26

import torch.nn as nn

class Decoder(nn.Module):
    def forward(self, hidden, mask):
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                hidden = self._gradient_checkpointing_func(lambda h: layer(h, mask), hidden)  # expect: CKPT030
            else:
                hidden = layer(hidden, mask)
        return hidden
