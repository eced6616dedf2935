# TRL prepares the model itself; kwargs from a variable; args from the command line.
# ckptlint-case: target-version=transformers=4.46

from peft import get_peft_model
from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments
from trl import SFTConfig, SFTTrainer

model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
SFTTrainer(model=model, args=SFTConfig("out", gradient_checkpointing=True)).train()

second = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
args = TrainingArguments("out", gradient_checkpointing=True, gradient_checkpointing_kwargs=gc_kwargs)
Trainer(model=second, args=args).train()

(training_args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
third = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
Trainer(model=third, args=training_args).train()
