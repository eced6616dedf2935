# Under DeepSpeed the Trainer builds no torch DDP: `ddp_find_unused_parameters` is inert.
# ckptlint-case: target-version=transformers=4.40.0
from transformers import Trainer, TrainingArguments

args = TrainingArguments(
    "out",
    gradient_checkpointing=True,
    ddp_find_unused_parameters=True,
    deepspeed="configs/zero2.json",
)
Trainer(model=model, args=args, train_dataset=ds).train()
