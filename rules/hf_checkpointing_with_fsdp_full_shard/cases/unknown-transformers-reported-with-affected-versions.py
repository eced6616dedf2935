# No transformers version declared nor installed: reported, naming the versions it holds for
# (as every version-keyed rule does).
# ckptlint-case: column=8
# ckptlint-case: message-contains=(affects transformers<4.52; target version unknown)

from transformers import TrainingArguments

args = TrainingArguments(  # expect: CKPT004
    "out",
    fsdp=["full_shard", "auto_wrap"],
    gradient_checkpointing=True,
)
