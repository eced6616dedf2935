# A backbone stage that collects its blocks' outputs in a list for a feature pyramid,
# checkpointed with torch's reentrant default: the list comes back with tensors that do not
# require grad, so none of the stage's blocks trains.
# ckptlint-case: column=24
# ckptlint-case: message-contains=which returns a list (from `Stage.forward`)
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Stage(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.ModuleList(
            [nn.Sequential(nn.Conv2d(dim, dim, 3, padding=1), nn.GroupNorm(8, dim), nn.ReLU()) for _ in range(depth)]
        )

    def forward(self, x):
        features = []
        for block in self.blocks:
            x = block(x)
            features.append(x)
        return features


class PyramidBackbone(nn.Module):
    def __init__(self, dim=64, depth=3, use_checkpoint=True):
        super().__init__()
        self.stem = nn.Conv2d(3, dim, 7, stride=2, padding=3)
        self.stage = Stage(dim, depth)
        self.fuse = nn.Conv2d(dim * depth, dim, 1)
        self.use_checkpoint = use_checkpoint

    def forward(self, images):
        x = self.stem(images)
        if self.use_checkpoint:
            features = checkpoint(self.stage, x)  # expect: CKPT035
        else:
            features = self.stage(x)
        return self.fuse(torch.cat(features, dim=1))
