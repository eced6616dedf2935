# A lambda over the loop's block, checkpointed in the loop.
# ckptlint-case: column=13

from torch.utils.checkpoint import checkpoint

def forward(self, x, mask):
    for block in self.blocks:
        x = checkpoint(lambda t: block(t, mask), x, use_reentrant=False)  # expect: CKPT030
    return x
