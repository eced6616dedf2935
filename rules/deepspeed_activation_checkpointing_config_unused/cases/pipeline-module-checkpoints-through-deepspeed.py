# DeepSpeed's PipelineModule checkpoints its layers with DeepSpeed's own checkpoint function.
import deepspeed
from deepspeed.pipe import LayerSpec, PipelineModule

ds_config = {
    "train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 4,
    "activation_checkpointing": {"partition_activations": True, "cpu_checkpointing": True},
}


def build(layer_class, depth):
    model = PipelineModule([LayerSpec(layer_class) for _ in range(depth)], num_stages=2, activation_checkpoint_interval=1)
    return deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config)
