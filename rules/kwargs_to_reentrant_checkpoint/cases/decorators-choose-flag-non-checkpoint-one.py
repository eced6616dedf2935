# Decorators that choose the flag, a non-checkpoint one, a wrapper binding the keyword, positional inputs.
# Decorators that choose the flag (written, or `setdefault`), one that is no torch
# checkpoint, a wrapper binding the keyword itself, positional inputs, the flag at the call.

import functools
import torch
import torch.utils.checkpoint as cp

def checkpoint(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return cp.checkpoint(fn, *args, use_reentrant=False, **kwargs)
    return wrapper

def recompute(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        kwargs.setdefault("use_reentrant", False)
        return cp.checkpoint(fn, *args, **kwargs)
    return wrapper

def saved(fn):
    def wrapper(*args, **kwargs):
        out = fn(*args, **kwargs)
        torch.save(out, "out.pt")
        return out
    return wrapper

def recompute_method(method):
    def wrapper(self, x, mask=None, **kwargs):
        return cp.checkpoint(method, self, x, mask, **kwargs)
    return wrapper

def plain(fn):
    def wrapper(*args, **kwargs):
        return cp.checkpoint(fn, *args, **kwargs)
    return wrapper

@checkpoint
def chunk_fwd(q, k, scale=None):
    return q * k

@recompute
def chunk_bwd(q, k, scale=None):
    return q * k

@saved
def decay(g, scale=1.0):
    return g * scale

@plain
def fused(q, k, scale=None):
    return q * k

class Attention:
    @recompute_method
    def attend(self, x, mask=None):
        return x

    def forward(self, q, k, s, mask):
        y = chunk_fwd(q, k, scale=s) + chunk_bwd(q, k, scale=s) + decay(q, scale=s)
        y = y + fused(q, k, s) + fused(q, k, scale=s, use_reentrant=False)
        return y + self.attend(q, mask=mask)
