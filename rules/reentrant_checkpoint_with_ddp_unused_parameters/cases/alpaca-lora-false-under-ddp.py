# alpaca-lora's `ddp_find_unused_parameters=False if ddp else None`: not True anywhere.
# ckptlint-case: target-version=transformers=4.30.0
import os

import transformers

world_size = int(os.environ.get("WORLD_SIZE", 1))
ddp = world_size != 1
trainer = transformers.Trainer(
    model=model,
    train_dataset=train_data,
    args=transformers.TrainingArguments(
        per_device_train_batch_size=4,
        gradient_checkpointing=True,
        output_dir="lora-alpaca",
        ddp_find_unused_parameters=False if ddp else None,
    ),
)
trainer.train()
