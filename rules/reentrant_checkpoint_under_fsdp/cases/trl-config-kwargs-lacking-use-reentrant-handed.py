# A TRL config with kwargs lacking `use_reentrant`, handed to transformers' Trainer on TRL 0.27.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: target-version=trl=0.27.1

from accelerate import FullyShardedDataParallelPlugin
from transformers import Trainer
from trl import DPOConfig

plugin = FullyShardedDataParallelPlugin()
args = DPOConfig("out", gradient_checkpointing=True, gradient_checkpointing_kwargs={"preserve_rng_state": True})
trainer = Trainer(model=model, args=args)
