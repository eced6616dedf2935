# `AutoModel` with the library's own classes: any architecture, not reported.
# ckptlint-case: target-version=transformers=4.46

from transformers import AutoModel

model = AutoModel.from_pretrained(args.model)
model.gradient_checkpointing_enable()
for batch in loader:
    model(**batch).last_hidden_state.mean().backward()
