# The cache turned off by a static method, a wrapper's `use_cache=False`, DeepSpeed's engine.
# A static method of a helper class turns the cache off; a model wrapper passes
# `use_cache=False` in its forward; DeepSpeed's engine runs the model's forward.

import deepspeed
import torch
from transformers import AutoModelForCausalLM

class Prep:
    @staticmethod
    def for_training(model):
        model.gradient_checkpointing_enable()
        model.config.use_cache = False
        return model

class Wrapper(torch.nn.Module):
    def __init__(self, name):
        super().__init__()
        self.lm = AutoModelForCausalLM.from_pretrained(name)
        self.lm.gradient_checkpointing_enable()

    def forward(self, batch):
        return self.lm(**batch, use_cache=False).loss

a = Prep.for_training(AutoModelForCausalLM.from_pretrained("a"))
b = Wrapper("b")
c = AutoModelForCausalLM.from_pretrained("c")
c.gradient_checkpointing_enable()
engine, optimizer, _, _ = deepspeed.initialize(model=c, config=ds_config)
for batch in loader:
    a(**batch).loss.backward()
    b(batch).backward()
    engine.backward(engine(**batch, use_cache=False).loss)
