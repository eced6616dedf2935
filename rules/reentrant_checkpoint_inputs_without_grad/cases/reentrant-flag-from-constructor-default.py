# A `use_reentrant` flag the constructor defaults to True and no call changes: reported, without a fix.
# ckptlint-case: column=13
# ckptlint-case: message-contains=True by default
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Net(nn.Module):
    def __init__(self, use_reentrant=True):
        super().__init__()
        self.use_reentrant = use_reentrant
        self.stem = nn.Conv2d(3, 16, 3)
        self.head = nn.Linear(16, 4)

    def forward(self, x):
        h = checkpoint(self.stem, x, use_reentrant=self.use_reentrant)  # expect: CKPT007
        return self.head(h.mean((2, 3)))


net = Net(use_reentrant=True)
