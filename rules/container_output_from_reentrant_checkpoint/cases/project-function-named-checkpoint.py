# A project function called `checkpoint` (saving the model) is no activation checkpoint.
from torch import nn


def checkpoint(model, path):
    return {"state_dict": model.state_dict(), "path": path}


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return {"logits": self.fc(x)}


def save(head):
    return checkpoint(head, "head.pt")
