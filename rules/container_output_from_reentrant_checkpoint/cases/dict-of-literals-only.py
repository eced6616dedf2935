# A function returning a dict of literals only: no tensor in it to lose its gradient.
from torch.utils.checkpoint import checkpoint


def describe(x):
    return {"kind": "identity", "scale": 1.0}


def run(x):
    return checkpoint(describe, x, use_reentrant=True)
