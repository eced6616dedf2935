# A project Trainer that sets its own checkpointing kwargs: not transformers' default.
# ckptlint-case: target-version=transformers=4.46

from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

class NonReentrantTrainer(Trainer):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.args.gradient_checkpointing_kwargs = {"use_reentrant": False}

model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), LoraConfig(r=8))
args = TrainingArguments("out", gradient_checkpointing=True)
NonReentrantTrainer(model=model, args=args, train_dataset=ds).train()
