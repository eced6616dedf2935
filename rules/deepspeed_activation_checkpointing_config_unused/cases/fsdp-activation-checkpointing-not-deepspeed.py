# `activation_checkpointing` in a dict that is no DeepSpeed config (a trainer's FSDP settings) is not this rule's.
from transformers import TrainingArguments

fsdp_settings = {
    "fsdp": "full_shard auto_wrap",
    "fp16": True,
    "activation_checkpointing": {"enabled": True, "offload": True},
}

args = TrainingArguments("out", fsdp=fsdp_settings["fsdp"], fsdp_config={"activation_checkpointing": True})
