# A pass-through helper whose caller chooses the reentrant implementation itself.
# ckptlint-case: column=12
# ckptlint-case: message-contains=with the `use_reentrant=True` this call passes

from torch.utils.checkpoint import checkpoint

def ckpt(fn, *args, **kwargs):
    return checkpoint(fn, *args, **kwargs)

def attend(layer, x, mask):
    return ckpt(layer, x, attn_mask=mask, use_reentrant=True)  # expect: CKPT032
