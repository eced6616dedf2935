# The workaround in a helper of the same file: an embeddings forward hook.
# ckptlint-case: target-version=transformers=4.46

from peft import get_peft_model
from transformers import AutoModelForCausalLM

def make_inputs_require_grad(module, inputs, output):
    output.requires_grad_(True)

def prepare(model):
    model.get_input_embeddings().register_forward_hook(make_inputs_require_grad)
    return model

model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
model = prepare(model)
model.gradient_checkpointing_enable()
for batch in loader:
    model(**batch).loss.backward()
