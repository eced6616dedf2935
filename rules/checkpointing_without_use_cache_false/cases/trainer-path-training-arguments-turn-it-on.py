# The Trainer path: `TrainingArguments(gradient_checkpointing=True)` turns checkpointing on in the Trainer; the fix goes before the Trainer is built.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=15
# ckptlint-case: message-contains=enabled by `TrainingArguments(gradient_checkpointing=True)` on `model`

from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


def main(args, train_dataset):
    model = AutoModelForCausalLM.from_pretrained(args.model_name)
    training_args = TrainingArguments(output_dir="out", gradient_checkpointing=True, bf16=True)
    trainer = Trainer(model=model, args=training_args, train_dataset=train_dataset)  # expect: CKPT020
    trainer.train()
