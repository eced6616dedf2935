# transformers >= 5.0 enables input grads for text models itself, reentrant or not.
# ckptlint-case: target-version=transformers=5.17

from peft import get_peft_model
from transformers import AutoModelForCausalLM

model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
for batch in loader:
    model(**batch).loss.backward()
