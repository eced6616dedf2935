# A reference model enabled like the policy, then kept for inference.
# A reference model enabled like the policy, then kept for inference: Hugging Face
# checkpoints only in training mode.
# ckptlint-case: target-version=transformers=4.46

from accelerate import FullyShardedDataParallelPlugin
from transformers import AutoModelForCausalLM

plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
reference = AutoModelForCausalLM.from_pretrained("x")
reference.gradient_checkpointing_enable()
reference.eval()
trainer = DPOLoop(policy, reference_model=reference)
