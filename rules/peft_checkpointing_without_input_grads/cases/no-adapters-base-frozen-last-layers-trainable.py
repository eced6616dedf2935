# No adapters: the base frozen, its last layers trainable again, reentrant by default.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: message-contains=frozen layers are made trainable again (line 11

from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("m")
for param in model.parameters():
    param.requires_grad = False
for param in model.model.layers[-2:].parameters():
    param.requires_grad = True
model.gradient_checkpointing_enable()  # expect: CKPT021
for batch in loader:
    model(**batch).loss.backward()
