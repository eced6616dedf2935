# An encoder that returns its output with the intermediate features a dense head supervises,
# checkpointed reentrant: the tuple's first tensor keeps its gradient path, the features in the
# list do not, so the auxiliary losses on them never reach the encoder.
# ckptlint-case: column=25
# ckptlint-case: message-contains=which returns a tuple holding a list (from `Encoder.forward`)
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Encoder(nn.Module):
    def __init__(self, dim, depth, taps=(1, 3)):
        super().__init__()
        self.layers = nn.ModuleList([nn.TransformerEncoderLayer(dim, 4, 2 * dim, batch_first=True) for _ in range(depth)])
        self.taps = taps

    def forward(self, x):
        intermediates = []
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i in self.taps:
                intermediates.append(x)
        return x, intermediates


class DenseModel(nn.Module):
    def __init__(self, dim=64, depth=4):
        super().__init__()
        self.embed = nn.Linear(16, dim)
        self.encoder = Encoder(dim, depth)
        self.head = nn.Linear(dim, 1)
        self.aux_heads = nn.ModuleList([nn.Linear(dim, 1) for _ in range(2)])

    def forward(self, tokens):
        h = self.embed(tokens)
        out, features = checkpoint(self.encoder, h, use_reentrant=True)  # expect: CKPT035
        aux = [head(f).mean() for head, f in zip(self.aux_heads, features)]
        return self.head(out).mean() + sum(aux)
