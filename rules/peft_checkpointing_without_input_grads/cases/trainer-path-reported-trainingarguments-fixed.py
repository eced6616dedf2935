# The Trainer path: reported at TrainingArguments, fixed before the Trainer.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=8
# ckptlint-case: message-contains=`TrainingArguments(gradient_checkpointing=True)` for `model`, handed to `Trainer` at line 14

from peft import get_peft_model
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

args = TrainingArguments(  # expect: CKPT021
    output_dir="out",
    gradient_checkpointing=True,
)
model = get_peft_model(AutoModelForCausalLM.from_pretrained("m"), lora_config)
trainer = Trainer(model=model, args=args, train_dataset=train)
trainer.train()
