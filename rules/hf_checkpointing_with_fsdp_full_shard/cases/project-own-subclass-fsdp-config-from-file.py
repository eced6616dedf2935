# The project's own subclass; fsdp_config from a file: reported, no fix.
# ckptlint-case: column=8

from dataclasses import dataclass
from transformers import TrainingArguments

@dataclass
class ScriptArguments(TrainingArguments):
    model_name: str = "x"

args = ScriptArguments("out", fsdp="full_shard", gradient_checkpointing=True, fsdp_config="fsdp.json")  # expect: CKPT004
