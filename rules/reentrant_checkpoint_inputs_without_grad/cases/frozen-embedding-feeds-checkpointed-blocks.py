# A frozen embedding feeding checkpointed blocks (`use_reentrant` left out): none of the blocks trains.
# ckptlint-case: column=17
# ckptlint-case: message-contains=which `TinyLM` freezes at line 23
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
        self.embed.requires_grad_(False)  # keep the pretrained vocabulary fixed
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, input_ids):
        h = self.embed(input_ids)
        for block in self.blocks:
            h = cp.checkpoint(block, h)  # expect: CKPT007
        return self.lm_head(h)


if __name__ == "__main__":
    model = TinyLM(32000, 512, 12)
    logits = model(torch.randint(0, 32000, (2, 128)))
