# `use_cache = True` again after training, for generation.

from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2")
model.config.use_cache = False
model.gradient_checkpointing_enable()
for batch in loader:
    model(**batch).loss.backward()
model.config.use_cache = True
model.generate(prompt)
