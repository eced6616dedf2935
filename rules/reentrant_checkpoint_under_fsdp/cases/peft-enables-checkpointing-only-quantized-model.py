# peft enables checkpointing only on a quantized model, and as it is told.
# ckptlint-case: target-version=transformers=4.44
# ckptlint-case: target-version=peft=0.10

import torch
from accelerate import FullyShardedDataParallelPlugin
from peft import prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
full = AutoModelForCausalLM.from_pretrained("m", torch_dtype=torch.bfloat16)
full = prepare_model_for_kbit_training(full)
quantized = AutoModelForCausalLM.from_pretrained("m", quantization_config=BitsAndBytesConfig(load_in_4bit=True))
quantized = prepare_model_for_kbit_training(quantized, gradient_checkpointing_kwargs={"use_reentrant": False})
frozen = AutoModelForCausalLM.from_pretrained("m", load_in_8bit=True)
frozen = prepare_model_for_kbit_training(frozen, use_gradient_checkpointing=False)
