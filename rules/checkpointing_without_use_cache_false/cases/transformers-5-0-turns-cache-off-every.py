# transformers >= 5.0 turns the cache off in every checkpointed layer.
# ckptlint-case: target-version=transformers=5.0

from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2")
model.gradient_checkpointing_enable()
for batch in loader:
    model(**batch).loss.backward()
