# A training wrapper's constructor freezes the token embedding of the model it holds, over its
# parameters; the encoder layers after it are checkpointed reentrant and train nothing.
# ckptlint-case: column=21
# ckptlint-case: message-contains=(`self.encoder.tok_embed`)
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Encoder(nn.Module):
    def __init__(self, vocab=30522, dim=256, depth=6, grad_checkpointing=True):
        super().__init__()
        self.tok_embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            [nn.TransformerEncoderLayer(dim, 4, 4 * dim, batch_first=True) for _ in range(depth)]
        )
        self.grad_checkpointing = grad_checkpointing

    def forward(self, ids):
        x = self.tok_embed(ids)
        for layer in self.layers:
            if self.grad_checkpointing and self.training:
                x = checkpoint(layer, x, use_reentrant=True)  # expect: CKPT007
            else:
                x = layer(x)
        return x


class ContrastiveModule(nn.Module):
    def __init__(self, temperature=0.05):
        super().__init__()
        self.encoder = Encoder()
        for param in self.encoder.tok_embed.parameters():
            param.requires_grad = False
        self.temperature = temperature

    def forward(self, ids, positives):
        a = self.encoder(ids).mean(1)
        b = self.encoder(positives).mean(1)
        logits = a @ b.T / self.temperature
        return nn.functional.cross_entropy(logits, torch.arange(len(a)))


def train(loader):
    module = ContrastiveModule()
    optimizer = torch.optim.AdamW(module.parameters(), lr=3e-5)
    for ids, positives in loader:
        module(ids, positives).backward()
        optimizer.step()
