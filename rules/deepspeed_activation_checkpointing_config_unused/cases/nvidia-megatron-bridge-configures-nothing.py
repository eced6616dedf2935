# NVIDIA's Megatron (a `megatron.core` / `megatron.bridge` import in a file without DeepSpeed) configures nothing: the Trainer's DeepSpeed section stays inert.
# ckptlint-case: column=5
from megatron.bridge import AutoBridge
from transformers import TrainingArguments

DS_ZERO3 = {
    "zero_optimization": {"stage": 3},
    "train_micro_batch_size_per_gpu": "auto",
    "activation_checkpointing": {"cpu_checkpointing": True},  # expect: CKPT008
}


def hf_args(output_dir):
    return TrainingArguments(output_dir, deepspeed=DS_ZERO3, gradient_checkpointing=True)


def megatron_model(name):
    return AutoBridge.from_hf_pretrained(name).to_megatron_provider()
