# Module constants: ZeRO-2 style sharding, or a mode only one branch shards with.

import os
from transformers import TrainingArguments

ZERO2 = "shard_grad_op auto_wrap"
if os.environ.get("FULL"):
    MODE = "full_shard auto_wrap"
else:
    MODE = ""

def build():
    zero2 = TrainingArguments("out", fsdp=ZERO2, gradient_checkpointing=True)
    either = TrainingArguments("out", fsdp=MODE, gradient_checkpointing=True)
    return zero2, either
