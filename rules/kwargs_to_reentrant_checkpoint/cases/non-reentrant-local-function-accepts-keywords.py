# Non-reentrant, and the local function accepts the keywords (by name or **kwargs).

from torch.utils.checkpoint import checkpoint

def run(hidden, mask=None):
    return hidden
def run_any(hidden, **extra):
    return hidden

y = checkpoint(run, x, mask=m, use_reentrant=False)
z = checkpoint(run_any, x, scale=2.0, use_reentrant=False)
