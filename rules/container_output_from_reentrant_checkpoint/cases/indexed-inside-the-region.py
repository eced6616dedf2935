# The model output is indexed inside the region (`.last_hidden_state`, `[0]`, `.to_tuple()`): a tensor or tuple comes out.
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers import CLIPVisionModel


class Tower(nn.Module):
    def __init__(self, name):
        super().__init__()
        self.vision_tower = CLIPVisionModel.from_pretrained(name)

    def last_state(self, pixel_values):
        return self.vision_tower(pixel_values).last_hidden_state

    def forward(self, pixel_values):
        a = checkpoint(lambda p: self.vision_tower(p).last_hidden_state, pixel_values, use_reentrant=True)
        b = checkpoint(lambda p: self.vision_tower(p)[0], pixel_values, use_reentrant=True)
        c = checkpoint(lambda p: self.vision_tower(p).to_tuple(), pixel_values, use_reentrant=True)
        d = checkpoint(self.last_state, pixel_values, use_reentrant=True)
        return a, b, c[0], d
