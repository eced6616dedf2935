# New tokens: PEFT trains a copy of the input embeddings, whose output requires grad.
# New tokens: PEFT trains a copy of the input embeddings (`modules_to_save`,
# `trainable_token_indices`), whose output requires grad.
# ckptlint-case: target-version=transformers=4.46

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("m")
model.resize_token_embeddings(len(tok))
cfg = LoraConfig(r=16, target_modules=["q_proj", "v_proj"], modules_to_save=["embed_tokens", "lm_head"])
model = get_peft_model(model, cfg)
Trainer(model=model, args=TrainingArguments("out", gradient_checkpointing=True)).train()
tokens = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(r=8, trainable_token_indices=[0, 1]))
tokens.gradient_checkpointing_enable()
for batch in loader:
    tokens(**batch).loss.backward()
