# The diffusers-era `create_custom_forward(module, return_dict=None)`: with `return_dict=False` the closure passes it and the block hands back its tuple (quiet); without it, `return_dict=None` takes the branch returning the `ModelOutput` (reported).
# ckptlint-case: column=20
# ckptlint-case: message-contains=`Transformer3DModelOutput`
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


def create_custom_forward(module, return_dict=None):
    def custom_forward(*inputs):
        if return_dict is not None:
            return module(*inputs, return_dict=return_dict)
        else:
            return module(*inputs)

    return custom_forward


class CrossAttnDownBlock3D(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.spatial = Transformer3DModel(dim)
        self.temporal = Transformer3DModel(dim)
        self.gradient_checkpointing = False

    def forward(self, hidden_states, encoder_hidden_states=None):
        if self.training and self.gradient_checkpointing:
            hidden_states = torch.utils.checkpoint.checkpoint(
                create_custom_forward(self.spatial, return_dict=False), hidden_states, encoder_hidden_states
            )[0]
            return torch.utils.checkpoint.checkpoint(  # expect: CKPT035
                create_custom_forward(self.temporal), hidden_states, encoder_hidden_states
            ).sample
        hidden_states = self.spatial(hidden_states, encoder_hidden_states=encoder_hidden_states).sample
        return self.temporal(hidden_states, encoder_hidden_states=encoder_hidden_states).sample
