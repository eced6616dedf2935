# A LLaVA-style vision tower (`CLIPVisionModel`) checkpointed whole with `use_reentrant=True`.
# ckptlint-case: column=23
# ckptlint-case: message-contains=the `ModelOutput` that `CLIPVisionModel` returns without `return_dict=False`
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from transformers import CLIPVisionModel


class LlavaVision(nn.Module):
    def __init__(self, tower_name, hidden_size):
        super().__init__()
        self.vision_tower = CLIPVisionModel.from_pretrained(tower_name)
        self.mm_projector = nn.Linear(1024, hidden_size)

    def forward(self, pixel_values):
        if self.training:
            outputs = checkpoint(self.vision_tower, pixel_values, use_reentrant=True)  # expect: CKPT035
        else:
            outputs = self.vision_tower(pixel_values)
        return self.mm_projector(outputs.last_hidden_state[:, 1:])
