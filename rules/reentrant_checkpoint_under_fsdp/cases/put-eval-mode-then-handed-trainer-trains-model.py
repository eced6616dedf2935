# Put in eval mode, then handed to a Trainer, which trains it (`model.train()`).
# ckptlint-case: target-version=transformers=4.46

from accelerate import FullyShardedDataParallelPlugin
from transformers import AutoModelForCausalLM, Trainer

plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
model = AutoModelForCausalLM.from_pretrained("x")
model.gradient_checkpointing_enable()  # expect: CKPT002
model.eval()
Trainer(model, args).train()
