# A project function named `checkpoint` (it saves weights): no torch checkpoint runs.
import torch
import torch.nn as nn


def checkpoint(module, path):
    torch.save(module.state_dict(), path)
    return module


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3)

    def forward(self, pixel_values):
        checkpoint(self.stem, pixel_values)
        return self.stem(pixel_values)


model = Net()
