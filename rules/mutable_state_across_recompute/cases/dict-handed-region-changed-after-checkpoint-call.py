# A dict handed to the region, changed after the checkpoint call.
# ckptlint-case: column=9
# ckptlint-case: message-contains=`cfg`, which the checkpointed region reads, is assigned an item after this call (line 10)

from torch.utils.checkpoint import checkpoint

def forward(self, x):
    cfg = {"scale": 2.0}
    y = checkpoint(self.scaled, x, cfg, use_reentrant=False)  # expect: CKPT031
    cfg["scale"] = 3.0
    return y
