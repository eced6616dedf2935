# Not torch's: DeepSpeed, JAX, timm's wrapper, a relative import.

import jax
from deepspeed.checkpointing import checkpoint
from timm.models._manipulate import checkpoint_seq
from .utils import checkpoint as save_checkpoint

y = checkpoint(block, x)
z = jax.checkpoint(f)(x)
w = checkpoint_seq(blocks, x)
save_checkpoint(model, "x.pt")
