# The raw input handed by `forward` to a helper method that checkpoints the first layers.
# ckptlint-case: column=13
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class SimpleCheckpointedModel(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.linear1 = nn.Linear(hidden, hidden)
        self.linear2 = nn.Linear(hidden, hidden)
        self.linear3 = nn.Linear(hidden, hidden)

    def _first_two(self, x):
        return self.linear2(self.linear1(x))

    def _checkpointed_forward(self, x):
        x = checkpoint(self._first_two, x, use_reentrant=True)  # expect: CKPT007
        return x

    def forward(self, x, y):
        x = self._checkpointed_forward(x)
        return nn.functional.cross_entropy(self.linear3(x), y)


def main(loader):
    model = SimpleCheckpointedModel(32)
    for x, y in loader:
        model(x, y).backward()
