# A dict without `use_reentrant` runs reentrant; version unknown: the message says so.
# ckptlint-case: message-contains=(affects transformers<5.0; target version unknown)

from peft import get_peft_model
from transformers import AutoModelForCausalLM

model = get_peft_model(AutoModelForCausalLM.from_pretrained("m", use_cache=False), lora_config)
model.base_model.model.gradient_checkpointing_enable({"preserve_rng_state": False})  # expect: CKPT021
for batch in loader:
    model(**batch).loss.backward()
