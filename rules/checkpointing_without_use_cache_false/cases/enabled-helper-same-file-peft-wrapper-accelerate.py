# Enabled in a helper of the same file; a PEFT wrapper and accelerate in between.
# ckptlint-case: target-version=transformers=4.57
# ckptlint-case: column=9

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

def load_model(name, use_gc):
    model = AutoModelForCausalLM.from_pretrained(name)
    if use_gc:
        model.gradient_checkpointing_enable()  # expect: CKPT020
    return get_peft_model(model, LoraConfig(r=8))

def train(args):
    model = load_model(args.model, args.gc)
    model, optimizer = accelerator.prepare(model, optimizer)
    for batch in loader:
        accelerator.backward(model(**batch).loss)
