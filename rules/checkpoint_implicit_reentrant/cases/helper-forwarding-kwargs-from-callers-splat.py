# A helper forwarding `**kwargs` from callers that splat `**kwargs` of their own.

from torch.utils.checkpoint import checkpoint

def auto_grad_checkpoint(module, *args, **kwargs):
    return checkpoint(module, *args, **kwargs)

def run(blocks, x, **kwargs):
    for block in blocks:
        x = auto_grad_checkpoint(block, x, **kwargs)
    return x
