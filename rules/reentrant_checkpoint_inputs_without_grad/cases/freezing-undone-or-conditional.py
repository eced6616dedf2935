# Freezing the class may undo (an `unfreeze` method) or only does under a flag: not known to be frozen.
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Encoder(nn.Module):
    def __init__(self, vocab, dim, freeze_embeddings=False):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.other = nn.Embedding(vocab, dim)
        self.other.requires_grad_(False)
        if freeze_embeddings:
            self.embed.requires_grad_(False)
        self.block = nn.Linear(dim, dim)

    def unfreeze(self):
        self.other.requires_grad_(True)

    def forward(self, ids):
        h = checkpoint(self.block, self.embed(ids), use_reentrant=True)
        g = checkpoint(self.block, self.other(ids), use_reentrant=True)
        return h + g


encoder = Encoder(100, 16)
