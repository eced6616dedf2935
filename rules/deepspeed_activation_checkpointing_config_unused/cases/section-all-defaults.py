# A section that only spells out DeepSpeed's defaults asks for nothing: nothing is lost.
import deepspeed

ds_config = {
    "train_batch_size": 16,
    "fp16": {"enabled": True},
    "activation_checkpointing": {
        "partition_activations": False,
        "cpu_checkpointing": False,
        "contiguous_memory_optimization": False,
        "number_checkpoints": None,
        "synchronize_checkpoint_boundary": False,
        "profile": False,
    },
}


def build(model):
    return deepspeed.initialize(model=model, config=ds_config)
