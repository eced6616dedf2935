# transformers 5 defaults to non-reentrant; kwargs from a variable are unknown.
# ckptlint-case: target-version=transformers=5.0

from transformers import AutoModelForCausalLM, TrainingArguments
from torch.distributed.fsdp import FullyShardedDataParallel

model = AutoModelForCausalLM.from_pretrained("x")
model.gradient_checkpointing_enable()
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=cfg.gc_kwargs)
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
model = FullyShardedDataParallel(model)
