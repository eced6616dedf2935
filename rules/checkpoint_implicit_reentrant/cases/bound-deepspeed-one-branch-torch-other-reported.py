# Bound to DeepSpeed's on one branch and torch's on the other: reported, without a fix.
# ckptlint-case: column=5
# ckptlint-case: message-contains=where the name is torch's (it may also be `deepspeed.checkpointing.checkpoint`)

try:
    from deepspeed.checkpointing import checkpoint
except ImportError:
    from torch.utils.checkpoint import checkpoint

y = checkpoint(block, x)  # expect: CKPT001
