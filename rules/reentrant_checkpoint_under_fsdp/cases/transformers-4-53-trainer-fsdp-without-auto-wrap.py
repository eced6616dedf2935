# transformers 4.53, a Trainer `fsdp` without `auto_wrap`: no policy, so one FSDP1 unit holds
# every reentrant layer region; the message names only that harm.
# ckptlint-case: target-version=transformers=4.53
# ckptlint-case: column=8
# ckptlint-case: message-contains=several reentrant regions in one unit crash backward

from transformers import TrainingArguments

args = TrainingArguments(  # expect: CKPT002
    output_dir="out",
    fsdp="shard_grad_op",
    gradient_checkpointing=True,
)
