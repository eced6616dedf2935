# The two on branches that never both run: FSDP's wrapper or Hugging Face's own.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: target-version=torch=2.4

import functools
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from transformers import AutoModelForCausalLM
from transformers.models.llama.modeling_llama import LlamaDecoderLayer

def main(args, policy):
    model = AutoModelForCausalLM.from_pretrained(args.model)
    if args.fsdp:
        model = FSDP(model, auto_wrap_policy=policy)
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, LlamaDecoderLayer))
    else:
        model.gradient_checkpointing_enable()

def main_flags(args, policy):
    model = AutoModelForCausalLM.from_pretrained(args.model)
    fsdp_ac = args.fsdp and args.activation_checkpointing
    if not fsdp_ac:
        model.gradient_checkpointing_enable()
    model = FSDP(model, auto_wrap_policy=policy)
    if fsdp_ac:
        apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, LlamaDecoderLayer))
