# FSDP's own activation checkpointing, `shard_grad_op`, and DDP with gradient checkpointing.

from transformers import TrainingArguments

args = TrainingArguments(
    "out", fsdp="full_shard auto_wrap", fsdp_config={"activation_checkpointing": True}
)
ssd = TrainingArguments("out", fsdp="shard_grad_op", gradient_checkpointing=True)
ddp = TrainingArguments("out", gradient_checkpointing=True)
