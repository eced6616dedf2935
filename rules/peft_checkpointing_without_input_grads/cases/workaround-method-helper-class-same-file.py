# The workaround in a method of a helper class of the same file.
# ckptlint-case: target-version=transformers=4.46

from peft import get_peft_model
from transformers import AutoModelForCausalLM

class TrainingPrep:
    def __init__(self, use_cache=False):
        self.use_cache = use_cache

    def __call__(self, model):
        model.enable_input_require_grads()
        model.config.use_cache = self.use_cache

prepare = TrainingPrep()
model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
model.gradient_checkpointing_enable()
prepare(model)
for batch in loader:
    model(**batch).loss.backward()
