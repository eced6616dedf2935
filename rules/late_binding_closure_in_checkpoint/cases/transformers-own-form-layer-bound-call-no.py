# Transformers' own form: the layer's bound `__call__`, no closure.

import torch.nn as nn

class Decoder(nn.Module):
    def forward(self, hidden, mask):
        for layer in self.layers:
            hidden = self._gradient_checkpointing_func(layer.__call__, hidden, mask)
        return hidden
