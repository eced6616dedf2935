# One mechanism per model; HF GC on one model, torch's on another.

from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

teacher.gradient_checkpointing_enable()
apply_activation_checkpointing(student, check_fn=lambda m: isinstance(m, Block))
