# A copy handed to a method: the method's own parameter of the same name is not the caller's list.

import torch
from torch.utils.checkpoint import checkpoint

class Mixer(torch.nn.Module):
    def _mix(self, x, memory):
        return x + torch.stack(memory).mean(0)

    def forward(self, chunks):
        memory = [chunks[0]]
        for c in chunks[1:]:
            y = checkpoint(self._mix, c, list(memory), use_reentrant=False)
            memory.append(y)
        return y
