# A block whose forward returns a dict, checkpointed without `use_reentrant` (torch's reentrant default).
# ckptlint-case: column=19
# ckptlint-case: message-contains=`use_reentrant` omitted
import torch.utils.checkpoint as cp
from torch import nn


class MoEBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.ffn = nn.Linear(dim, dim)
        self.router = nn.Linear(dim, 4)

    def forward(self, x):
        logits = self.router(x)
        out = {"hidden_states": x + self.ffn(x)}
        out["router_logits"] = logits
        return out


class Encoder(nn.Module):
    def __init__(self, dim, depth):
        super().__init__()
        self.blocks = nn.ModuleList([MoEBlock(dim) for _ in range(depth)])

    def forward(self, x):
        aux = []
        for block in self.blocks:
            out = cp.checkpoint(block, x)  # expect: CKPT035
            x = out["hidden_states"]
            aux.append(out["router_logits"])
        return x, aux
