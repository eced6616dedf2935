# The same strategy on both branches: they run together.
# ckptlint-case: target-version=transformers=4.45
# ckptlint-case: column=5

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

if args.strategy == "fsdp":
    model.gradient_checkpointing_enable()  # expect: CKPT002
if args.strategy == "fsdp":
    model = FSDP(model)
