# A helper whose calls pass `use_reentrant`, or splat `**kwargs` that may carry it: the callers choose.
# The same helper where a call passes `use_reentrant`, or splats `**kwargs` that may
# carry it: the callers choose.

from torch.utils.checkpoint import checkpoint

def auto_grad_checkpoint(module, *args, **kwargs):
    return checkpoint(module, *args, **kwargs)

def run(blocks, x):
    for block in blocks:
        x = auto_grad_checkpoint(block, x, use_reentrant=False)
    return x
