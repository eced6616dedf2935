# Eval mode restored before backward; another model; regions without dropout or BatchNorm.
# Eval mode between forward and backward: restored before backward; another model
# (a teacher); a module whose regions hold neither dropout nor BatchNorm.

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.drop = nn.Linear(8, 8), nn.Dropout(0.1)

    def forward(self, x):
        return self.drop(self.fc(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head, self.proj = Head(), nn.Linear(8, 8)

    def _project(self, x):
        return self.proj(x).relu()

    def forward(self, x, plain=False):
        if plain:
            return checkpoint(self._project, x, use_reentrant=False)
        return checkpoint(self.head, x, use_reentrant=False)

class Plain(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        return checkpoint(self.proj, x, use_reentrant=False)

def train(loader, teacher):
    model, plain = Net(), Plain()
    for x in loader:
        loss = model(x).sum() + plain(x).sum()
        teacher.eval()
        plain.eval()
        model.eval()
        with torch.no_grad():
            shown = model(x)
        model.train()
        loss.backward()
