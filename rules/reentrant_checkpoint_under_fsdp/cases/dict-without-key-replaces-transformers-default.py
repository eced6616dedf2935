# A dict without the key replaces transformers' default in every version.
# ckptlint-case: target-version=transformers=5.17

from torch.distributed.fsdp import FullyShardedDataParallel

model.gradient_checkpointing_enable({"preserve_rng_state": False})  # expect: CKPT002
model = FullyShardedDataParallel(model)
