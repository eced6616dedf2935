# Dict outputs under the non-reentrant implementation: `use_reentrant=False`, `checkpoint_wrapper`'s default.
from torch import nn
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper
from torch.utils.checkpoint import checkpoint
from transformers import CLIPVisionModel


class DictBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return {"hidden_states": self.fc(x)}


class Net(nn.Module):
    def __init__(self, dim, tower):
        super().__init__()
        self.block = DictBlock(dim)
        self.wrapped = checkpoint_wrapper(DictBlock(dim))
        self.vision_tower = CLIPVisionModel.from_pretrained(tower)

    def forward(self, x, pixel_values):
        a = checkpoint(self.block, x, use_reentrant=False)
        b = self.wrapped(x)
        c = checkpoint(self.vision_tower, pixel_values, use_reentrant=False)
        return a["hidden_states"] + b["hidden_states"], c.last_hidden_state
