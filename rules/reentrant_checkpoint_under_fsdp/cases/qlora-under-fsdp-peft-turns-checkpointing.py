# QLoRA under FSDP: peft turns checkpointing on with transformers' reentrant default.
# ckptlint-case: target-version=transformers=4.44
# ckptlint-case: target-version=peft=0.10
# ckptlint-case: column=9
# ckptlint-case: message-contains=`prepare_model_for_kbit_training` on a model loaded in 4 or 8 bit

from accelerate import FullyShardedDataParallelPlugin
from peft import prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD")
model = AutoModelForCausalLM.from_pretrained("m", quantization_config=BitsAndBytesConfig(load_in_4bit=True))
model = prepare_model_for_kbit_training(model)  # expect: CKPT002
