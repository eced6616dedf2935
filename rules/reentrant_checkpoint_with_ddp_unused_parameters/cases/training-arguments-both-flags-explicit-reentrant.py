# `TrainingArguments` with reentrant checkpointing and `ddp_find_unused_parameters=True`: the Trainer's own DDP.
# ckptlint-case: column=8
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

model = get_peft_model(AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.1-8B"), LoraConfig(r=16))
args = TrainingArguments(  # expect: CKPT006
    output_dir="out",
    per_device_train_batch_size=4,
    gradient_checkpointing=True,
    gradient_checkpointing_kwargs={"use_reentrant": True},
    ddp_find_unused_parameters=True,
)
Trainer(model=model, args=args, train_dataset=train_dataset).train()
