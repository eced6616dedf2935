# The Trainer path, with FSDP from a Lightning-free accelerate plugin elsewhere.
# ckptlint-case: target-version=transformers=4.40
# ckptlint-case: column=8

from accelerate import FullyShardedDataParallelPlugin
from transformers import TrainingArguments

plugin = FullyShardedDataParallelPlugin()
args = TrainingArguments("out", gradient_checkpointing=True)  # expect: CKPT002
