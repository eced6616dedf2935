# Evaluated first, then put back in training mode: not kept for inference.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=5

from transformers import AutoModelForCausalLM

def train(data):
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    model.gradient_checkpointing_enable()  # expect: CKPT020
    model.eval()
    evaluate(model)
    for epoch in range(3):
        model.train()
        for batch in data:
            model(**batch).loss.backward()
