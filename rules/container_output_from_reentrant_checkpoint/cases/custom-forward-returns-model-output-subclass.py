# `create_custom_forward(layer)` over a project layer returning its own `ModelOutput` subclass.
# ckptlint-case: column=29
# ckptlint-case: message-contains=a Hugging Face `ModelOutput`, `LayerOutput`
from dataclasses import dataclass
from typing import Optional

import torch
import torch.utils.checkpoint
from torch import nn
from transformers.utils import ModelOutput


@dataclass
class LayerOutput(ModelOutput):
    hidden_states: torch.FloatTensor = None
    attentions: Optional[torch.FloatTensor] = None


class Layer(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.attn = nn.MultiheadAttention(dim, 4, batch_first=True)

    def forward(self, hidden_states):
        out, weights = self.attn(hidden_states, hidden_states, hidden_states)
        return LayerOutput(hidden_states=hidden_states + out, attentions=weights)


class Encoder(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.layers = nn.ModuleList([Layer(dim) for _ in range(depth)])
        self.gradient_checkpointing = True

    def forward(self, hidden_states):
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:

                def create_custom_forward(module):
                    def custom_forward(*inputs):
                        return module(*inputs)

                    return custom_forward

                layer_out = torch.utils.checkpoint.checkpoint(  # expect: CKPT035
                    create_custom_forward(layer), hidden_states, use_reentrant=True
                )
            else:
                layer_out = layer(hidden_states)
            hidden_states = layer_out.hidden_states
        return hidden_states
