# TRL's GRPO trainer given transformers' `TrainingArguments` (TRL 0.28).
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: target-version=trl=1.9

from accelerate import FullyShardedDataParallelPlugin
from transformers import TrainingArguments
from trl.trainer.grpo_trainer import GRPOTrainer

plugin = FullyShardedDataParallelPlugin()
args = TrainingArguments("out", gradient_checkpointing=True)
trainer = GRPOTrainer(model=model, args=args, reward_funcs=reward)
