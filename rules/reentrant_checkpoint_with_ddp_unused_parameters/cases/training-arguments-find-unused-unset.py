# `ddp_find_unused_parameters` left unset on a `PreTrainedModel`: the Trainer turns it off when the model checkpoints.
# ckptlint-case: target-version=transformers=4.40.0
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = AutoModelForCausalLM.from_pretrained("gpt2")
args = TrainingArguments("out", gradient_checkpointing=True, per_device_train_batch_size=8)
Trainer(model=model, args=args, train_dataset=ds).train()
