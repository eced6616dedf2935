# The import guarded for very old torch (`None` otherwise): where the call runs, it is torch's checkpoint.
# The import guarded for very old torch, `None` otherwise: where the call runs, the
# name is torch's checkpoint.
# ckptlint-case: column=16

try:
    from torch.utils.checkpoint import checkpoint as grad_ckpt
except ImportError:
    grad_ckpt = None

def maybe_checkpoint(module, x, enabled):
    if enabled and grad_ckpt is not None:
        return grad_ckpt(module, x)  # expect: CKPT001
    return module(x)
