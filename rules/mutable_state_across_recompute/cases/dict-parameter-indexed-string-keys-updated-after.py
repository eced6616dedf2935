# A dict parameter (indexed by string keys) updated after each checkpointed block.
# ckptlint-case: column=13
# ckptlint-case: message-contains=`ctx`, which the checkpointed region reads, is assigned an item after this call (line 10)

from torch.utils.checkpoint import checkpoint

def forward(self, x, ctx):
    for block in self.blocks:
        x = checkpoint(block, x, ctx, use_reentrant=False)  # expect: CKPT031
        ctx["layer_idx"] += 1
    return x
