# Features computed under `torch.no_grad()` (a frozen backbone) fed into a checkpointed trainable neck.
# ckptlint-case: column=17
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Adapter(nn.Module):
    def __init__(self, backbone, dim):
        super().__init__()
        self.backbone = backbone
        self.neck = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))
        self.head = nn.Linear(dim, 2)

    def forward(self, x):
        with torch.no_grad():
            feats = self.backbone(x)
        feats = checkpoint(self.neck, feats, use_reentrant=True)  # expect: CKPT007
        return self.head(feats)
