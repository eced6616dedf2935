# The diffusers-era `create_custom_forward(module, return_dict=False)`: the closure passes `return_dict=False`, so the block hands back its tuple.
from dataclasses import dataclass

import torch
import torch.utils.checkpoint
from torch import nn
from transformers.utils import ModelOutput


@dataclass
class Transformer3DModelOutput(ModelOutput):
    sample: torch.FloatTensor = None


class Transformer3DModel(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.proj = nn.Linear(dim, dim)

    def forward(self, hidden_states, encoder_hidden_states=None, return_dict: bool = True):
        output = self.proj(hidden_states)
        if not return_dict:
            return (output,)
        return Transformer3DModelOutput(sample=output)


class CrossAttnDownBlock3D(nn.Module):
    def __init__(self, dim, layers):
        super().__init__()
        self.attentions = nn.ModuleList([Transformer3DModel(dim) for _ in range(layers)])
        self.gradient_checkpointing = False

    def forward(self, hidden_states, encoder_hidden_states=None):
        for attn in self.attentions:
            if self.training and self.gradient_checkpointing:

                def create_custom_forward(module, return_dict=None):
                    def custom_forward(*inputs):
                        if return_dict is not None:
                            return module(*inputs, return_dict=return_dict)
                        else:
                            return module(*inputs)

                    return custom_forward

                hidden_states = torch.utils.checkpoint.checkpoint(
                    create_custom_forward(attn, return_dict=False), hidden_states, encoder_hidden_states
                )[0]
            else:
                hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states).sample
        return hidden_states
