# The same closure without `return_dict`: `return_dict=None` takes the branch that returns the `ModelOutput`.
# ckptlint-case: message-contains=`Transformer3DModelOutput`
# ckptlint-case: column=33
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

                hidden_states = torch.utils.checkpoint.checkpoint(  # expect: CKPT035
                    create_custom_forward(attn), hidden_states, encoder_hidden_states
                ).sample
            else:
                hidden_states = attn(hidden_states, encoder_hidden_states=encoder_hidden_states).sample
        return hidden_states
