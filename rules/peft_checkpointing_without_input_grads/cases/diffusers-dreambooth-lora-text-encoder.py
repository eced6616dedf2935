# diffusers DreamBooth LoRA: the text encoder is checkpointed before add_adapter.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=9
# ckptlint-case: message-contains=before `text_encoder.add_adapter` (line 13) adds the adapters

text_encoder = text_encoder_cls.from_pretrained(args.pretrained_model_name_or_path, subfolder="text_encoder")
text_encoder.requires_grad_(False)
if args.gradient_checkpointing:
    unet.enable_gradient_checkpointing()
    if args.train_text_encoder:
        text_encoder.gradient_checkpointing_enable()  # expect: CKPT021
if args.train_text_encoder:
    text_encoder.add_adapter(text_lora_config)
for batch in train_dataloader:
    accelerator.backward(compute_loss(unet, text_encoder, batch))
