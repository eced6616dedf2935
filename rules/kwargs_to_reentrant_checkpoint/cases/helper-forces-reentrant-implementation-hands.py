# A helper that forces the reentrant implementation and hands its **kwargs on.
# A helper that forces the reentrant implementation and hands its **kwargs on: the
# caller's keyword reaches it (a caller cannot pass `use_reentrant` a second time).
# ckptlint-case: column=12
# ckptlint-case: message-contains=hands its `**kwargs` to `checkpoint` (line 10) with `use_reentrant=True`

from torch.utils.checkpoint import checkpoint

def ckpt_reentrant(fn, *args, **kwargs):
    return checkpoint(fn, *args, use_reentrant=True, **kwargs)

def attend(layer, x, mask):
    return ckpt_reentrant(layer, x, attention_mask=mask)  # expect: CKPT032
