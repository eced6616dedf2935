# Checkpointing only without LoRA (PEFT's DreamBooth examples): separate `if`s that exclude each other.
# Checkpointing only without LoRA (PEFT's DreamBooth examples): the conditions exclude
# each other although they are separate `if` statements.
# ckptlint-case: target-version=transformers=4.46

from peft import LoraConfig, get_peft_model
from transformers import CLIPTextModel

text_encoder = CLIPTextModel.from_pretrained(path, subfolder="text_encoder")
if not args.train_text_encoder:
    text_encoder.requires_grad_(False)
elif args.train_text_encoder and args.use_lora:
    text_encoder = get_peft_model(text_encoder, LoraConfig(r=8))
if args.gradient_checkpointing:
    if args.train_text_encoder and not (args.use_lora or args.use_oft):
        text_encoder.gradient_checkpointing_enable()
for batch in loader:
    accelerator.backward(loss_fn(text_encoder, batch))
