# A transformers Trainer subclass defines `training_step` too: not a manual loop.

from transformers import AutoModelForCausalLM, Trainer

class DistillationTrainer(Trainer):
    def __init__(self, *args, teacher_name=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.teacher = AutoModelForCausalLM.from_pretrained(teacher_name)
        self.teacher.gradient_checkpointing_enable()

    def training_step(self, model, inputs, num_items_in_batch=None):
        return super().training_step(model, inputs, num_items_in_batch)
