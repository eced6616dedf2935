# Tensors changed in place are autograd's business, and an unrelated dict.

from torch.utils.checkpoint import checkpoint

def forward(self, x, mask):
    stats = {}
    y = checkpoint(self.block, x, mask, use_reentrant=False)
    mask[0] = 0
    stats["norm"] = y.norm()
    return y
