# TRL 0.28's trainers set `use_reentrant=False` when the kwargs leave it out: not reported.
# ckptlint-case: target-version=transformers=4.57.0
# ckptlint-case: target-version=trl=0.28.0
from trl import SFTConfig, SFTTrainer

config = SFTConfig(output_dir="out", gradient_checkpointing=True, ddp_find_unused_parameters=True)
SFTTrainer(model="Qwen/Qwen2.5-0.5B", args=config, train_dataset=dataset).train()
