# transformers 4.x: no kwargs means `{"use_reentrant": True}`.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: message-contains=transformers < 5.0 defaults to `use_reentrant=True`

from accelerate import FullyShardedDataParallelPlugin

plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
model.gradient_checkpointing_enable()  # expect: CKPT002
