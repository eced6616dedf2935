# A section built from a splat or a computed key is not known: nothing is reported.
import deepspeed

BASE = {"partition_activations": True}

ds_config = {
    "train_micro_batch_size_per_gpu": 1,
    "zero_optimization": {"stage": 2},
    "activation_checkpointing": {**BASE, "cpu_checkpointing": False},
}


def build(model):
    return deepspeed.initialize(model=model, config=ds_config)
