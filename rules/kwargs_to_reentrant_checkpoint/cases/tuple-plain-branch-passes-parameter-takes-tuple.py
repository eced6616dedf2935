# A tuple the plain branch passes as it is: the parameter takes a tuple.

from torch.utils.checkpoint import checkpoint

def scaled(x, scales=None):
    return x

def run(x, gain, training):
    if training:
        y = checkpoint(scaled, x, (gain, 2.0), use_reentrant=False)
    else:
        y = scaled(x, scales=(gain, 2.0))
    return y
