# LoRA adapters with dropout inside the checkpointed decoder layers, config and kwargs bound to names.
# LoRA adapters with dropout inside the checkpointed decoder layers (Llama's own layers
# draw nothing): the config bound to a name, the kwargs a module-level dict.
# ckptlint-case: message-contains=`lora_dropout=0.05`

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

FAST_GC = {"use_reentrant": False, "preserve_rng_state": False}
lora = LoraConfig(r=16, lora_dropout=0.05, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM")
model = get_peft_model(AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-3B"), lora)
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=FAST_GC)  # expect: CKPT033
