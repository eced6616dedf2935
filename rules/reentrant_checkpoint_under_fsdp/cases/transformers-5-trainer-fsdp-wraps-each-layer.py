# transformers 5: the Trainer's `fsdp` wraps each decoder layer (`auto_wrap_policy` defaults to
# TRANSFORMER_BASED_WRAP, and `fsdp_version` to 2, `training_args.py` 5.17), and each layer
# checkpoints inside its own unit: reentrant kwargs add nothing measured. Not reported.
# ckptlint-case: target-version=transformers=5.17

from transformers import TrainingArguments

args = TrainingArguments(
    output_dir="out",
    fsdp="shard_grad_op",
    gradient_checkpointing=True,
    gradient_checkpointing_kwargs={"use_reentrant": True},
)
