# Megatron-DeepSpeed style: `deepspeed.checkpointing.configure` reads the config, and the layers go through DeepSpeed's checkpoint.
import deepspeed
import torch.nn as nn

DS_CONFIG = {
    "train_batch_size": 256,
    "zero_optimization": {"stage": 1},
    "activation_checkpointing": {"partition_activations": True, "contiguous_memory_optimization": True,
                                 "number_checkpoints": 24, "cpu_checkpointing": False},
}


def set_deepspeed_activation_checkpointing(mpu, num_layers):
    deepspeed.checkpointing.configure(mpu, deepspeed_config=DS_CONFIG, num_checkpoints=num_layers)


class Transformer(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)

    def forward(self, hidden):
        for layer in self.layers:
            hidden = deepspeed.checkpointing.checkpoint(layer, hidden)
        return hidden
