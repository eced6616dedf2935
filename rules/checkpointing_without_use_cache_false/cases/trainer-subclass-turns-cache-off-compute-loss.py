# The Trainer path through the project's own Trainer subclasses: one passes `use_cache=False` in its `compute_loss` (quiet), the other leaves the cache alone (reported).
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=5

from transformers import AutoModelForCausalLM, Trainer, TrainingArguments


class NoCacheTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        outputs = model(**inputs, use_cache=False)
        return (outputs.loss, outputs) if return_outputs else outputs.loss


class PlainTrainer(Trainer):
    def compute_loss(self, model, inputs, return_outputs=False, **kwargs):
        outputs = model(**inputs)
        return (outputs.loss, outputs) if return_outputs else outputs.loss


def main(data):
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    args = TrainingArguments(output_dir="out", gradient_checkpointing=True)
    NoCacheTrainer(model=model, args=args, train_dataset=data).train()


def plain(data):
    model = AutoModelForCausalLM.from_pretrained("gpt2")
    args = TrainingArguments(output_dir="out", gradient_checkpointing=True)
    PlainTrainer(model=model, args=args, train_dataset=data).train()  # expect: CKPT020
