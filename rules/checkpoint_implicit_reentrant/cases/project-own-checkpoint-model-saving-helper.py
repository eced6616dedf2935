# The project's own `checkpoint`: a model-saving helper.

import torch

def checkpoint(model, path):
    torch.save(model.state_dict(), path)

checkpoint(model, "last.pt")
