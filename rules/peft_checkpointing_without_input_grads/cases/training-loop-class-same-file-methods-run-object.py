# A training-loop class of the same file: its methods run on the object built here.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=9

from peft import get_peft_model
from transformers import AutoModelForCausalLM

class LoopRunner:
    def __init__(self, model, loader):
        self.model = model
        self.loader = loader

    def setup(self):
        self.model.gradient_checkpointing_enable()  # expect: CKPT021

    def run(self):
        for batch in self.loader:
            self.model(**batch).loss.backward()

runner = LoopRunner(get_peft_model(AutoModelForCausalLM.from_pretrained("m", use_cache=False), lora), loader)
runner.setup()
runner.run()
