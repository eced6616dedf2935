# Checkpointing turned on after `get_peft_model`, a comment above the call.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: message-contains=after `get_peft_model` (line 9): transformers < 5.0 runs it reentrant by default

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", use_cache=False)
model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
# trade compute for memory
model.gradient_checkpointing_enable()  # expect: CKPT021
for batch in loader:
    model(**batch).loss.backward()
