# A test class: the test that enables checkpointing only generates.
# A test class: each test is a run of its own, and the one that calls backward trains
# another model; the test that enables checkpointing only generates.

import torch
from transformers import AutoModelForCausalLM
from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training

class TestQuantized:
    def test_generate_after_prepare(self):
        model = AutoModelForCausalLM.from_pretrained("m", load_in_4bit=True)
        model = prepare_model_for_kbit_training(model)
        model = get_peft_model(model, LoraConfig())
        model.generate(input_ids=torch.LongTensor([[0, 1]]))

    def test_gradients_flow(self):
        layer = torch.nn.Linear(2, 2)
        layer(torch.ones(1, 2)).mean().backward()
