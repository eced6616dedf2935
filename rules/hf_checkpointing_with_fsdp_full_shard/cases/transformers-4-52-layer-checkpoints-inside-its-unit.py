# transformers 4.52 and later: the decoder layer (`GradientCheckpointingLayer`) checkpoints inside
# its own FSDP unit, after the unshard: 4 backward all-gathers, as without checkpointing. With
# `auto_wrap` each layer is its own unit, one reentrant region each: no CKPT002 either.
# ckptlint-case: target-version=transformers=4.52

from transformers import TrainingArguments

args = TrainingArguments(
    output_dir="out",
    fsdp="full_shard auto_wrap",
    gradient_checkpointing=True,
    bf16=True,
)
