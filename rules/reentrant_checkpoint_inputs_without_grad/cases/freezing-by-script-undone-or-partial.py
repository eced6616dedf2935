# What a script freezes only under a flag, makes trainable again later, freezes on another
# model, or freezes together with the checkpointed blocks: the blocks' inputs are not known to
# need no grad, or nothing in the regions trains.
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Decoder(nn.Module):
    def __init__(self, vocab, dim, depth):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, vocab)

    def forward(self, ids):
        x = self.embed(ids)
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=True)
        return self.head(x)


class Teacher(nn.Module):
    def __init__(self, vocab, dim):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)


def fit(model, loader):
    for ids in loader:
        model(ids).mean().backward()


def under_a_flag(args, loader):
    model = Decoder(1000, 64, 4)
    if args.freeze_embeddings:
        model.embed.requires_grad_(False)
    fit(model, loader)


def two_stages(loader):
    model = Decoder(1000, 64, 4)
    model.embed.requires_grad_(False)
    fit(model, loader)
    model.embed.requires_grad_(True)  # stage 2: everything trains
    fit(model, loader)


def another_model(loader):
    model = Decoder(1000, 64, 4)
    teacher = Teacher(1000, 64)
    teacher.embed.requires_grad_(False)
    fit(model, loader)


def head_only(loader):
    model = Decoder(1000, 64, 4)
    model.embed.requires_grad_(False)
    model.blocks.requires_grad_(False)
    fit(model, loader)


def named_filter(loader):
    model = Decoder(1000, 64, 4)
    for name, param in model.embed.named_parameters():
        if "weight" in name:
            param.requires_grad = False
    fit(model, loader)


def unfrozen_through_a_tuple(loader):
    model = Decoder(1000, 64, 4)
    model.requires_grad_(False)
    for module in (model.blocks, model.head):
        module.requires_grad_(True)
    fit(model, loader)
