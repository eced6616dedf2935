# Lightning's DeepSpeedStrategy calls `deepspeed.checkpointing.configure` with the section itself.
import lightning.pytorch as pl
from lightning.pytorch.strategies import DeepSpeedStrategy

config = {
    "train_micro_batch_size_per_gpu": 2,
    "zero_optimization": {"stage": 2},
    "activation_checkpointing": {"partition_activations": True, "cpu_checkpointing": True},
}


def fit(module, data):
    trainer = pl.Trainer(strategy=DeepSpeedStrategy(config=config), precision="bf16-mixed")
    trainer.fit(module, data)
