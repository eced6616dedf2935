# gpt-neox style: the model-parallel helper's `checkpoint` is DeepSpeed's, so the project checkpoints through DeepSpeed.
import deepspeed
from megatron_utils import mpu

mpu.checkpoint = deepspeed.checkpointing.checkpoint
mpu.get_cuda_rng_tracker = deepspeed.checkpointing.get_cuda_rng_tracker

ds_config = {
    "train_micro_batch_size_per_gpu": 4,
    "activation_checkpointing": {"partition_activations": True, "synchronize_checkpoint_boundary": True},
}


def build(model):
    return deepspeed.initialize(model=model, config=ds_config)
