# Passed through a variable or an expression: the author chose.

from torch.utils.checkpoint import checkpoint

def forward(self, x, reentrant):
    x = checkpoint(self.a, x, use_reentrant=reentrant)
    return checkpoint(self.b, x, use_reentrant=not self.config.non_reentrant)
