# `.detach()`ed features into a reentrant checkpoint: the projector inside gets no gradient.
# ckptlint-case: column=16
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Distiller(nn.Module):
    def __init__(self, teacher, dim):
        super().__init__()
        self.teacher = teacher
        self.projector = nn.Linear(dim, dim)

    def project(self, feats):
        return self.projector(feats).relu()

    def forward(self, x):
        feats = self.teacher(x).detach()
        return checkpoint(self.project, feats.float(), use_reentrant=True)  # expect: CKPT007
