# Checkpointing before get_peft_model: PEFT enables input grads; QLoRA preparation.
# ckptlint-case: target-version=transformers=4.46

from peft import get_peft_model, prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

model = AutoModelForCausalLM.from_pretrained("m")
model.gradient_checkpointing_enable()
model = get_peft_model(model, lora_config)

qmodel = AutoModelForCausalLM.from_pretrained("m", quantization_config=BitsAndBytesConfig(load_in_4bit=True))
qmodel = prepare_model_for_kbit_training(qmodel)
qmodel = get_peft_model(qmodel, lora_config)
qmodel.gradient_checkpointing_enable()
for batch in loader:
    model(**batch).loss.backward()
    qmodel(**batch).loss.backward()
