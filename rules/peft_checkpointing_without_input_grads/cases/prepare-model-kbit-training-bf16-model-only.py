# `prepare_model_for_kbit_training` on a bf16 model only freezes it: no input grads.
# `prepare_model_for_kbit_training` on a model loaded in bf16 only freezes it: input
# grads are enabled for a quantized model alone (peft 0.4 to 0.17).
# ckptlint-case: target-version=transformers=4.40
# ckptlint-case: message-contains=after `get_peft_model` (line 13)

import torch
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM

model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-2-7b-hf", torch_dtype=torch.bfloat16)
model = prepare_model_for_kbit_training(model)
model = get_peft_model(model, LoraConfig(r=8, target_modules=["q_proj", "v_proj"]))
model.gradient_checkpointing_enable()  # expect: CKPT021
for batch in []:
    model(**batch).loss.backward()
