# Evaluated before training, then trained: the eval does not keep it for inference.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=5

from accelerate import FullyShardedDataParallelPlugin
from transformers import AutoModelForCausalLM

def train():
    plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
    model = AutoModelForCausalLM.from_pretrained("x")
    model.gradient_checkpointing_enable()  # expect: CKPT002
    model.eval()
    evaluate(model)
    model.train()
