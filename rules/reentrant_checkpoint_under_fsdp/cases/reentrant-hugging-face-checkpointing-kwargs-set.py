# Reentrant Hugging Face checkpointing kwargs set on training arguments under FSDP1.

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

model = FSDP(model)
training_args.gradient_checkpointing_kwargs = {"use_reentrant": True}  # expect: CKPT002
