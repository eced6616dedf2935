# Lightning's `strategy="ddp_find_unused_parameters_true"` with a checkpoint that leaves `use_reentrant` out.
# ckptlint-case: column=17
import lightning as L
import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Backbone(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.stages = nn.ModuleList(nn.Sequential(nn.Linear(128, 128), nn.GELU()) for _ in range(6))
        self.aux_head = nn.Linear(128, 4)  # only used when `self.hparams.aux` is set

    def forward(self, x):
        for stage in self.stages:
            x = checkpoint(stage, x)  # expect: CKPT006
        return x

    def training_step(self, batch, batch_idx):
        x, y = batch
        return nn.functional.mse_loss(self(x).mean(-1), y)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


if __name__ == "__main__":
    devices = torch.cuda.device_count()
    trainer = L.Trainer(devices=devices, strategy="ddp_find_unused_parameters_true" if devices > 1 else "auto")
    trainer.fit(Backbone())
