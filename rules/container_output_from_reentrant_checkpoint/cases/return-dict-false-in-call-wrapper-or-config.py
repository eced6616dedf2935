# `return_dict=False` at the call inside the region, in the wrapper that calls the model, or in `from_pretrained`.
import functools

from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers import AutoModel, CLIPVisionModel


class Encoders(nn.Module):
    def __init__(self, vision_name, text_name):
        super().__init__()
        self.vision_tower = CLIPVisionModel.from_pretrained(vision_name)
        self.text_encoder = AutoModel.from_pretrained(text_name, return_dict=False)

    def _vision(self, pixel_values):
        return self.vision_tower(pixel_values, return_dict=False)

    def forward(self, pixel_values, embeds):
        a = checkpoint(lambda p: self.vision_tower(p, return_dict=False), pixel_values, use_reentrant=True)
        b = checkpoint(self._vision, pixel_values, use_reentrant=True)
        c = checkpoint(functools.partial(self.vision_tower, return_dict=False), pixel_values, use_reentrant=True)
        d = checkpoint(self.text_encoder, embeds, use_reentrant=True)
        return a[0], b[0], c[0], d[0]
