# The training script freezes the pretrained embedding of the model it builds; the blocks it
# feeds are checkpointed reentrant (`use_reentrant` left out), so none of them trains.
# ckptlint-case: column=17
# ckptlint-case: message-contains=which example.py:38 freezes (`model.embed`)
import torch
import torch.nn as nn
import torch.utils.checkpoint as cp


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class TinyLM(nn.Module):
    def __init__(self, vocab, dim, depth):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        h = self.embed(input_ids)
        for block in self.blocks:
            h = cp.checkpoint(block, h)  # expect: CKPT007
        return self.lm_head(h)


def main(loader, epochs=1):
    model = TinyLM(32000, 512, 12)
    model.embed.weight.data.copy_(torch.load("embeddings.pt"))
    # The vocabulary stays fixed: only the blocks and the head are fine-tuned.
    model.embed.requires_grad_(False)
    optimizer = torch.optim.AdamW(p for p in model.parameters() if p.requires_grad)
    for _ in range(epochs):
        for ids, labels in loader:
            loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), labels.flatten())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
