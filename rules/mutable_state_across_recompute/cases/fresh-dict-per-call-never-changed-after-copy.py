# A fresh dict per call, never changed after it; a copy; a change before the call.

from torch.utils.checkpoint import checkpoint

def forward(self, x):
    for block in self.blocks:
        cfg = {"scale": block.scale}
        x = checkpoint(block, x, cfg, use_reentrant=False)
    state = {"step": 0}
    state["step"] += 1
    y = checkpoint(self.head, x, dict(state), use_reentrant=False)
    state["step"] += 1
    return y
