# On transformers 4.x, `gradient_checkpointing=True` without kwargs is reentrant.
# ckptlint-case: target-version=transformers=4.40.0
# ckptlint-case: column=8
from transformers import Trainer, TrainingArguments

args = TrainingArguments(  # expect: CKPT006
    "out",
    gradient_checkpointing=True,
    ddp_find_unused_parameters=True,
    bf16=True,
)
trainer = Trainer(model=model, args=args, train_dataset=ds)
trainer.train()
