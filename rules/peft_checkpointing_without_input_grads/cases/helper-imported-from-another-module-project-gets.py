# A helper imported from another module of the project gets the model first.
# ckptlint-case: target-version=transformers=4.46

from peft import get_peft_model
from transformers import AutoModelForCausalLM
from .training_utils import prepare_for_training

model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
prepare_for_training(model)
model.gradient_checkpointing_enable()
for batch in loader:
    model(**batch).loss.backward()
