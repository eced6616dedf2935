# A decorator whose wrapper hands its **kwargs to checkpoint: the kernel's keyword reaches it.
# A decorator whose wrapper hands its **kwargs to checkpoint: the decorated kernel's
# keyword reaches the reentrant default.
# ckptlint-case: column=12
# ckptlint-case: message-contains=keyword argument `scale` passed through `chunk_fwd` (line 17), decorated by `@checkpoint` (line 10)

import functools
import torch.utils.checkpoint

def checkpoint(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return torch.utils.checkpoint.checkpoint(fn, *args, **kwargs)
    return wrapper

@checkpoint
def chunk_fwd(q, k, v, scale=None):
    return q * k * v * scale

def attention(q, k, v, s):
    return chunk_fwd(q, k, v, scale=s)  # expect: CKPT032
