# A causal LM checkpointed and trained by hand, its cache left on.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: message-contains=`model`, a generative `AutoModelForCausalLM`

from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained(args.model_name)
model.gradient_checkpointing_enable()  # save memory  # expect: CKPT020
for batch in loader:
    loss = model(**batch).loss
    loss.backward()
