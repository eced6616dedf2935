# TRL defaults to non-reentrant: from 0.28 every trainer, on 0.27 every config.
# TRL defaults to non-reentrant (`library.TRL_NON_REENTRANT_*`): from 0.28 every
# trainer, on 0.27 every config; a kwargs dict without the key gets it too.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: target-version=trl=0.29

from accelerate import FullyShardedDataParallelPlugin
from trl import SFTConfig, SFTTrainer

plugin = FullyShardedDataParallelPlugin()
args = SFTConfig("out", gradient_checkpointing=True)
trainer = SFTTrainer(model=model, args=args, train_dataset=data)
