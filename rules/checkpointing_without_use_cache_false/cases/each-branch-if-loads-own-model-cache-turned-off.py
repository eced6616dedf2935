# Each branch of an `if` loads its own model; the cache is turned off after the `if`, for either.
# Each branch of the `if` loads its own model (one quantized and prepared, which
# enables checkpointing); the cache is turned off after the `if`, for either.

from transformers import AutoModelForCausalLM, BitsAndBytesConfig
from peft import prepare_model_for_kbit_training

def train(name, quantized, data):
    if quantized:
        config = BitsAndBytesConfig(load_in_4bit=True)
        model = AutoModelForCausalLM.from_pretrained(name, quantization_config=config)
        model = prepare_model_for_kbit_training(model)
    else:
        model = AutoModelForCausalLM.from_pretrained(name)
        model.gradient_checkpointing_enable()
    model.config.use_cache = False
    for batch in data:
        model(**batch).loss.backward()
