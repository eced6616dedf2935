# The sharding mode held by a module constant.
# ckptlint-case: column=12
# ckptlint-case: message-contains=fsdp=FSDP_MODE

from transformers import TrainingArguments

FSDP_MODE = "hybrid_shard auto_wrap"

def build():
    return TrainingArguments(output_dir="out", fsdp=FSDP_MODE, gradient_checkpointing=True)  # expect: CKPT004
