# The trainer the arguments are handed to sets the non-reentrant default itself.
# ckptlint-case: target-version=transformers=4.46

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from transformers import Trainer, TrainingArguments

class RLTrainer(Trainer):
    def __init__(self, model, args, train_dataset=None):
        if args.gradient_checkpointing:
            args.gradient_checkpointing_kwargs = args.gradient_checkpointing_kwargs or {}
            args.gradient_checkpointing_kwargs.setdefault("use_reentrant", False)
        super().__init__(model=model, args=args, train_dataset=train_dataset)

def prepare_reference(model, policy):
    return FSDP(model, auto_wrap_policy=policy)

args = TrainingArguments(output_dir="out", gradient_checkpointing=True)
RLTrainer(model="Qwen/Qwen3-1.7B", args=args).train()
