# The Trainer path, quiet: the cache turned off after the Trainer is built (alpaca-lora's order), `use_cache=False` at load, TRL's trainer, arguments from `HfArgumentParser` (not known to turn checkpointing on), checkpointing left off.
# ckptlint-case: target-version=transformers=4.46

from transformers import AutoModelForCausalLM, HfArgumentParser, Trainer, TrainingArguments
from trl import SFTConfig, SFTTrainer


def alpaca(train_data):
    model = AutoModelForCausalLM.from_pretrained("decapoda-research/llama-7b-hf")
    trainer = Trainer(
        model=model,
        train_dataset=train_data,
        args=TrainingArguments(output_dir="out", gradient_checkpointing=True),
    )
    model.config.use_cache = False
    trainer.train()


def loaded_without_cache(train_data):
    model = AutoModelForCausalLM.from_pretrained("gpt2", use_cache=False)
    args = TrainingArguments(output_dir="out", gradient_checkpointing=True)
    Trainer(model=model, args=args, train_dataset=train_data).train()


def sft(train_data):
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    config = SFTConfig(output_dir="out", gradient_checkpointing=True)
    SFTTrainer(model=model, args=config, train_dataset=train_data).train()


def parsed(train_data):
    (training_args,) = HfArgumentParser(TrainingArguments).parse_args_into_dataclasses()
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    Trainer(model=model, args=training_args, train_dataset=train_data).train()


def checkpointing_off(train_data):
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    args = TrainingArguments(output_dir="out", gradient_checkpointing=False)
    Trainer(model=model, args=args, train_dataset=train_data).train()
