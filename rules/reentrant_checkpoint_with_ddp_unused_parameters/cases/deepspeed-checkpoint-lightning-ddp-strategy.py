# DeepSpeed's `checkpoint` (reentrant) in a model trained with `DDPStrategy(find_unused_parameters=True)`.
# ckptlint-case: column=17
import deepspeed
import pytorch_lightning as pl
import torch.nn as nn
from pytorch_lightning.strategies import DDPStrategy


class Transformer(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.TransformerEncoderLayer(512, 8) for _ in range(12))

    def forward(self, x):
        for layer in self.layers:
            x = deepspeed.checkpointing.checkpoint(layer, x)  # expect: CKPT006
        return x


trainer = pl.Trainer(devices=8, strategy=DDPStrategy(find_unused_parameters=True))
