# A callable defined outside any loop; a loop variable it does not read.

from torch.utils.checkpoint import checkpoint

def forward(self, x):
    run = lambda t: self.mlp(t)
    for _ in range(self.repeats):
        x = checkpoint(run, x, use_reentrant=False)
    for i in range(3):
        x = checkpoint(lambda t: self.mlp(t) * 2, x, use_reentrant=False)
    return x
