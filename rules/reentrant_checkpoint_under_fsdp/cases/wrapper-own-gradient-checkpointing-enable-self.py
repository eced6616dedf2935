# A wrapper's own `gradient_checkpointing_enable(self)` handing on to its Hugging Face model's.
# A wrapper's own `gradient_checkpointing_enable(self)`, handing on to its Hugging Face
# model's (InternVideo's xtuner models): the call it makes is the one checked.
# ckptlint-case: target-version=transformers=4.46

import torch.nn as nn
from torch.distributed.fsdp import fully_shard
from transformers import AutoModelForCausalLM

class Finetune(nn.Module):
    def __init__(self, path):
        super().__init__()
        self.llm = AutoModelForCausalLM.from_pretrained(path)
        self.gradient_checkpointing_enable()

    def gradient_checkpointing_enable(self):
        self.llm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})

def shard(model):
    fully_shard(model)
