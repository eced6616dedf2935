# A config object handed to the region, its attribute annealed after the forward.
# A config object handed to the region, its attribute annealed after the forward
# (at a script's top level).
# ckptlint-case: column=5
# ckptlint-case: message-contains=`cfg` is passed as `cfg`, which is read by the region `Scorer.forward` checkpoints

from dataclasses import dataclass
import torch
from torch.utils.checkpoint import checkpoint

@dataclass
class RunConfig:
    temperature: float = 1.0

class Scorer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)

    def score(self, x, cfg):
        return torch.tanh(self.fc(x) / cfg.temperature)

    def forward(self, x, cfg):
        return checkpoint(self.score, x, cfg, use_reentrant=False)

model, cfg = Scorer(), RunConfig()
for x in loader:
    loss = model(x, cfg).sum()
    cfg.temperature *= 0.999  # expect: CKPT031
    loss.backward()
