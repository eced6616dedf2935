# The Trainer turns checkpointing on with the `TrainingArguments`' kwargs.
# ckptlint-case: message-contains=`TrainingArguments` with

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(lora_dropout=0.1))
args = TrainingArguments("out", gradient_checkpointing=True,
                         gradient_checkpointing_kwargs={"use_reentrant": False, "preserve_rng_state": False})
Trainer(model=model, args=args).train()  # expect: CKPT033
