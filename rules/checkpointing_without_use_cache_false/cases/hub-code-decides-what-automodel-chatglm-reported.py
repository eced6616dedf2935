# The Hub's code decides what `AutoModel` is (ChatGLM): reported, saying so.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: message-contains=an `AutoModel` loaded with `trust_remote_code=True` (the Hub's code picks the architecture

from transformers import AutoModel

model = AutoModel.from_pretrained("THUDM/chatglm-6b", trust_remote_code=True)
model.gradient_checkpointing_enable()  # expect: CKPT020
for batch in loader:
    model(**batch).loss.backward()
