# An encoder that is a transformers model on one constructor branch and a torchvision model on the other: not known to return a container.
import torch.nn as nn
from torch.utils.checkpoint import checkpoint
from torchvision import models
from transformers import AutoModel


class EmbeddingTower(nn.Module):
    def __init__(self, backbone, use_hf=False):
        super().__init__()
        self.use_hf = use_hf
        if use_hf:
            self.encoder = AutoModel.from_pretrained(backbone)
        else:
            self.encoder = models.convnext_tiny()
            self.encoder.classifier = nn.Flatten()
        self.head = nn.Linear(768, 256)

    def _hf_features(self, x):
        return self.encoder(pixel_values=x).pooler_output

    def forward(self, x):
        if self.use_hf:
            features = checkpoint(self._hf_features, x, use_reentrant=True)
        else:
            features = checkpoint(self.encoder, x, use_reentrant=True)
        return self.head(features)


def build_towers():
    return EmbeddingTower("facebook/convnextv2-tiny-1k-224", use_hf=True), EmbeddingTower("convnext_tiny")
