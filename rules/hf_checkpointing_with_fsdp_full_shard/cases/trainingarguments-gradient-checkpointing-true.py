# `TrainingArguments(gradient_checkpointing=True)` with `fsdp="full_shard auto_wrap"` by keyword.
# ckptlint-case: column=8

from transformers import TrainingArguments

args = TrainingArguments(  # expect: CKPT004
    output_dir="out",
    fsdp="full_shard auto_wrap",
    gradient_checkpointing=True,
)
