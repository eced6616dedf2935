# A library layer wrapped by class, the class passed to the project's helper.
# ckptlint-case: column=5
# ckptlint-case: message-contains=`GPT2Block (as passed at

import functools
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
    apply_activation_checkpointing,
    checkpoint_wrapper,
)
from transformers.models.gpt2.modeling_gpt2 import GPT2Block

def checkpoint_layers(model, layer_cls):
    no_rng = functools.partial(checkpoint_wrapper, preserve_rng_state=False)
    apply_activation_checkpointing(model, checkpoint_wrapper_fn=no_rng, check_fn=lambda m: isinstance(m, layer_cls))  # expect: CKPT033

checkpoint_layers(model, GPT2Block)
