# One script, two strategies: checkpointing only with DeepSpeed, FSDP only without it.
# One script, two strategies: checkpointing only with DeepSpeed, FSDP only without it
# (also across a method reading `self.args`).
# ckptlint-case: target-version=transformers=4.45

import argparse
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from transformers import AutoModelForCausalLM

class Module:
    def configure_model(self):
        if self.args.strategy == "deepspeed":
            self.model.gradient_checkpointing_enable()

args = argparse.ArgumentParser().parse_args()
model = AutoModelForCausalLM.from_pretrained("m", use_cache=False)
if args.strategy == "deepspeed":
    model.gradient_checkpointing_enable()
if args.strategy == "fsdp":
    model = FSDP(model)
