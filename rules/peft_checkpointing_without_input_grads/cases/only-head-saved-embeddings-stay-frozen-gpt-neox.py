# Only the head is saved: the embeddings stay frozen (GPT-NeoX's `embed_out` is no embedding).
# Only the head is saved: the embeddings stay frozen (a GPT-NeoX head named `embed_out`
# is no embedding either).
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=8
# ckptlint-case: message-contains=after `get_peft_model` (line 13)

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("EleutherAI/pythia-160m")
cfg = LoraConfig(r=16, target_modules=["query_key_value"], modules_to_save=["embed_out"])
model = get_peft_model(model, cfg)
args = TrainingArguments("out", gradient_checkpointing=True)  # expect: CKPT021
Trainer(model=model, args=args).train()
