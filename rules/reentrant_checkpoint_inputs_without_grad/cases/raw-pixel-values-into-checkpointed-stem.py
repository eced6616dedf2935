# The raw model input fed straight into a checkpointed stem: the stem and block get no gradient.
# ckptlint-case: column=13
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Classifier(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Conv2d(3, 64, 7, stride=2, padding=3)
        self.block = nn.Sequential(nn.Conv2d(64, 64, 3, padding=1), nn.GELU())
        self.head = nn.Linear(64, classes)

    def stem_and_block(self, x):
        return self.block(self.stem(x))

    def forward(self, pixel_values):
        h = checkpoint(self.stem_and_block, pixel_values, use_reentrant=True)  # expect: CKPT007
        return self.head(h.mean((2, 3)))


def train(loader):
    model = Classifier()
    optimizer = torch.optim.AdamW(model.parameters())
    for pixel_values, labels in loader:
        loss = nn.functional.cross_entropy(model(pixel_values), labels)
        loss.backward()
        optimizer.step()
