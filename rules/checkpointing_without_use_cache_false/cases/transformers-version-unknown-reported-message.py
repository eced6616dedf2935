# transformers version unknown: reported, and the message names the affected versions.
# ckptlint-case: message-contains=(affects transformers<5.0; target version unknown)

from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("gpt2", use_cache=True)
model.gradient_checkpointing_enable()  # expect: CKPT020
for batch in loader:
    model(**batch).loss.backward()
