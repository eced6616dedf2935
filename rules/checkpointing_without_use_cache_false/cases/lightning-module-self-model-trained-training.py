# A Lightning module: `self.model`, trained by `training_step`.
# ckptlint-case: target-version=transformers=4.46
# ckptlint-case: column=9

import lightning as L
from transformers import T5ForConditionalGeneration

class Summarizer(L.LightningModule):
    def __init__(self, name):
        super().__init__()
        self.model = T5ForConditionalGeneration.from_pretrained(name)
        self.model.gradient_checkpointing_enable()  # expect: CKPT020

    def training_step(self, batch, batch_idx):
        return self.model(**batch).loss
