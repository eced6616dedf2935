# `prepare_model_for_kbit_training` on a quantized model enables input grads itself.
# `prepare_model_for_kbit_training` on a quantized model (an argument, or a Hub
# checkpoint that carries its own quantization) enables input grads itself.

from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
from transformers import AutoModelForCausalLM, BitsAndBytesConfig

def train(name, data):
    model = AutoModelForCausalLM.from_pretrained(name, quantization_config=BitsAndBytesConfig(load_in_4bit=True))
    model = prepare_model_for_kbit_training(model)
    model = get_peft_model(model, LoraConfig(r=8))
    model.gradient_checkpointing_enable()
    for batch in data:
        model(**batch).loss.backward()

def train_gptq(data):
    model = AutoModelForCausalLM.from_pretrained("TheBloke/Llama-2-7B-GPTQ")
    model = prepare_model_for_kbit_training(model)
    model = get_peft_model(model, LoraConfig(r=8))
    model.gradient_checkpointing_enable()
    for batch in data:
        model(**batch).loss.backward()
