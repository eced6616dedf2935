# TRL configs that leave transformers' reentrant default, and a `use_reentrant` given.
# Before TRL 0.27 the trainers leave transformers' default; from 0.28 a TRL config
# handed to transformers' own Trainer does too; a `use_reentrant` given stays.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: target-version=trl=0.26
# ckptlint-case: column=8
# ckptlint-case: message-contains=transformers < 5.0 defaults to `use_reentrant=True`

from accelerate import FullyShardedDataParallelPlugin
from trl import SFTConfig, SFTTrainer

plugin = FullyShardedDataParallelPlugin()
args = SFTConfig("out", gradient_checkpointing=True)  # expect: CKPT002
trainer = SFTTrainer(model=model, args=args, train_dataset=data)
