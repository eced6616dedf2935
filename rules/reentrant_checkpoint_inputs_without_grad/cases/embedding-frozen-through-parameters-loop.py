# Embeddings frozen with `p.requires_grad = False` over their parameters, and a pretrained one (`freeze=True` by default).
# ckptlint-case: column=17
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Encoder(nn.Module):
    def __init__(self, vectors, layers):
        super().__init__()
        self.words = nn.Embedding.from_pretrained(vectors)
        self.positions = nn.Embedding(512, vectors.shape[1])
        for p in self.positions.parameters():
            p.requires_grad = False
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(vectors.shape[1], 8, batch_first=True) for _ in range(layers)
        )

    def forward(self, tokens, positions):
        x = self.words(tokens) + self.positions(positions)
        for layer in self.layers:
            x = checkpoint(layer, x, use_reentrant=True)  # expect: CKPT007
        return x


encoder = Encoder(torch.randn(1000, 64), 4)
