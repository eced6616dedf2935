# Backward in each iteration, but through every earlier region too: those recompute with the current block.
# Backward in each iteration, but through every earlier region too (the output is
# the next input): those recompute with the current block.
# ckptlint-case: column=13

from torch.utils.checkpoint import checkpoint

def deep_supervision(blocks, heads, x, y, loss_fn):
    for block, head in zip(blocks, heads):
        x = checkpoint(lambda t: block(t), x, use_reentrant=False)  # expect: CKPT030
        loss_fn(head(x), y).backward(retain_graph=True)
    return x
