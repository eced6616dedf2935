# transformers 4.51: the model checkpoints `decoder_layer.__call__`, the FSDP unit's own, so the
# reentrant recomputation all-gathers each layer again (measured 8 backward all-gathers against 4).
# ckptlint-case: target-version=transformers=4.51
# ckptlint-case: column=8
# ckptlint-case: message-contains=before 4.52 recomputes each layer outside its FSDP unit

from transformers import TrainingArguments

args = TrainingArguments(  # expect: CKPT004
    output_dir="out",
    fsdp="full_shard auto_wrap",
    gradient_checkpointing=True,
    bf16=True,
)
