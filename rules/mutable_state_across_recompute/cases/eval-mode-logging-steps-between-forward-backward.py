# Eval mode on logging steps between forward and backward: the head's dropout recomputes off.
# Eval mode on logging steps, between the forward and backward, restored only at the
# next step: the checkpointed head's dropout recomputes switched off.
# ckptlint-case: column=13
# ckptlint-case: message-contains=`model.eval()` puts the module in eval mode after `model(...)` (line 29) and before backward (line 33), but the region `Net.forward` checkpoints (example.py:24) runs dropout (Net.head -> Head.drop

import torch.nn as nn
from torch.utils.checkpoint import checkpoint

class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc, self.drop = nn.Linear(8, 8), nn.Dropout(0.3)

    def forward(self, x):
        return self.drop(self.fc(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = Head()

    def forward(self, x):
        return checkpoint(self.head, x, use_reentrant=False)

def train(model, loader):
    for step, x in enumerate(loader):
        model.train()
        loss = model(x).sum()
        if step % 10 == 0:
            model.eval()  # expect: CKPT031
            print(loss.item())
        loss.backward()

train(Net(), [])
