# transformers 4.53, a wrap of the whole model without an auto-wrap policy: every decoder layer is
# a reentrant region inside one FSDP1 unit, and backward crashes (measured on 4.53.0 and 5.17:
# `RuntimeError: The size of tensor a (0) must match the size of tensor b (32)`).
# ckptlint-case: target-version=transformers=4.53
# ckptlint-case: column=1
# ckptlint-case: message-contains=several reentrant regions in one unit crash backward

from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
model.gradient_checkpointing_enable()  # expect: CKPT002
model = FSDP(model, use_orig_params=True)
