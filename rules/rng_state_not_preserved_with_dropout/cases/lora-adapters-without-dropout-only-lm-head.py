# LoRA adapters without dropout, only on the LM head, with an unknown dropout, or on the other branch.
# LoRA adapters without dropout (peft's default 0.0, or 0 written), only on the LM head,
# with a dropout not known here, or added on the other branch.

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

fast = {"use_reentrant": False, "preserve_rng_state": False}
a = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(r=8))
a.gradient_checkpointing_enable(gradient_checkpointing_kwargs=fast)
b = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(r=8, lora_dropout=0.0))
b.gradient_checkpointing_enable(gradient_checkpointing_kwargs=fast)
c = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(lora_dropout=0.1, target_modules=["lm_head"]))
c.gradient_checkpointing_enable(gradient_checkpointing_kwargs=fast)
d = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(lora_dropout=args.dropout))
d.gradient_checkpointing_enable(gradient_checkpointing_kwargs=fast)
e = AutoModelForCausalLM.from_pretrained("m")
if args.lora:
    e = get_peft_model(e, LoraConfig(lora_dropout=0.1))
else:
    e.gradient_checkpointing_enable(gradient_checkpointing_kwargs=fast)
