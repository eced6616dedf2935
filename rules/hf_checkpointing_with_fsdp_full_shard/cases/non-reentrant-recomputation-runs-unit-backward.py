# Non-reentrant: the recomputation runs in the unit's backward, after FSDP's all-gather.

from transformers import TrainingArguments

args = TrainingArguments(
    "out",
    fsdp="full_shard auto_wrap",
    gradient_checkpointing=True,
    gradient_checkpointing_kwargs={"use_reentrant": False},
)
