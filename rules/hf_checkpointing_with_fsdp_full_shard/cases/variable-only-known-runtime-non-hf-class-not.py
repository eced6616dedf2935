# A variable is only known at runtime; a non-HF class is not TrainingArguments.

from transformers import TrainingArguments
from myproject.config import RunConfig

args = TrainingArguments("out", fsdp=cli.fsdp, gradient_checkpointing=True)
run = RunConfig(fsdp="full_shard", gradient_checkpointing=True)
