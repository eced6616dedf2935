# Reentrant Hugging Face checkpointing kwargs set on training arguments under FSDP2.

from torch.distributed.fsdp import fully_shard

fully_shard(model)
training_args.gradient_checkpointing_kwargs = {"use_reentrant": True}  # expect: CKPT002
