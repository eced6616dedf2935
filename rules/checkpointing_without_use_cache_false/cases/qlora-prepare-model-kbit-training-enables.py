# QLoRA: prepare_model_for_kbit_training enables checkpointing on a 4-bit model.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=9

from peft import prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

model = AutoModelForCausalLM.from_pretrained(
    "meta-llama/Llama-2-7b-hf", quantization_config=BitsAndBytesConfig(load_in_4bit=True)
)
model = prepare_model_for_kbit_training(model)  # expect: CKPT020
for batch in loader:
    model(**batch).loss.backward()
