# Hugging Face checkpointing plus `apply_activation_checkpointing` on the same model.
# ckptlint-case: target-version=torch=2.13
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: message-contains=after `gradient_checkpointing_enable` on the same model (at example.py:9)

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

model.gradient_checkpointing_enable()
model = FSDP(model)
apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, DecoderLayer))  # expect: CKPT005
