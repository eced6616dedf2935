# Lists that never leave the region as a list: turned into a tuple, indexed inside, only
# literals; and lists out of the non-reentrant implementation.
from torch import nn
from torch.utils.checkpoint import checkpoint


class Stage(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(dim, dim) for _ in range(3)])

    def forward(self, x):
        outs = []
        for block in self.blocks:
            x = block(x)
            outs.append(x)
        return outs


class TupleStage(Stage):
    def forward(self, x):
        outs = []
        for block in self.blocks:
            x = block(x)
            outs.append(x)
        return tuple(outs)


class Net(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.stage = Stage(dim)
        self.tuple_stage = TupleStage(dim)

    def sizes(self, x):
        return [1, 2, 3]

    def forward(self, x):
        a = checkpoint(self.tuple_stage, x, use_reentrant=True)
        b = checkpoint(lambda y: self.stage(y)[-1], x, use_reentrant=True)
        c = checkpoint(self.sizes, x, use_reentrant=True)
        d = checkpoint(self.stage, x, use_reentrant=False)
        return a[-1] + b + d[-1] + len(c)


class WithAttentionMaps(nn.Module):
    """Hands back its attention maps for logging beside the output: dropped, or never read."""

    def __init__(self, dim):
        super().__init__()
        self.blocks = nn.ModuleList([nn.MultiheadAttention(dim, 2, batch_first=True) for _ in range(2)])

    def forward(self, x):
        maps = []
        for block in self.blocks:
            x, weights = block(x, x, x)
            maps.append(weights)
        return x, maps


class Logged(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.encoder = WithAttentionMaps(dim)

    def forward(self, x):
        out, _ = checkpoint(self.encoder, x, use_reentrant=True)
        again, maps = checkpoint(self.encoder, out, use_reentrant=True)
        return again
