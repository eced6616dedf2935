# `checkpoint_sequential` over a `features` stack whose first segment holds the stem, given the images.
# ckptlint-case: column=13
import torch.nn as nn
from torch.utils.checkpoint import checkpoint_sequential


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3), nn.ReLU(),
            nn.Conv2d(32, 64, 3), nn.ReLU(),
            nn.Conv2d(64, 64, 3), nn.ReLU(),
        )
        self.classifier = nn.Linear(64, 10)

    def forward(self, images):
        x = checkpoint_sequential(self.features, 3, images, use_reentrant=True)  # expect: CKPT007
        return self.classifier(x.flatten(2).mean(-1))


def build_model():
    return ConvNet()


def main():
    model = build_model()
    model.train()
