# TRL's `SFTConfig` handed to transformers' own Trainer on TRL 0.28.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: target-version=trl=0.28
# ckptlint-case: column=8

from accelerate import FullyShardedDataParallelPlugin
from transformers import Trainer
from trl import SFTConfig

plugin = FullyShardedDataParallelPlugin()
args = SFTConfig("out", gradient_checkpointing=True)  # expect: CKPT002
trainer = Trainer(model=model, args=args)
