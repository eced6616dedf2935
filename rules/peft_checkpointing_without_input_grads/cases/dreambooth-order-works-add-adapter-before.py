# DreamBooth order that works: add_adapter before enabling checkpointing.
# ckptlint-case: target-version=transformers=4.46

from transformers import CLIPTextModel

text_encoder = CLIPTextModel.from_pretrained(path, subfolder="text_encoder")
text_encoder.requires_grad_(False)
text_encoder.add_adapter(text_lora_config)
text_encoder.gradient_checkpointing_enable()
for batch in loader:
    accelerator.backward(loss_fn(unet, text_encoder, batch))
