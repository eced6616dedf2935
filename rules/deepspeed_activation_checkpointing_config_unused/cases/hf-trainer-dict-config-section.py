# A DeepSpeed config written as a dict for transformers' Trainer: its activation-checkpointing section is never applied.
# ckptlint-case: column=5
# ckptlint-case: message-contains=(`partition_activations`, `cpu_checkpointing`) is never applied
from transformers import AutoModelForCausalLM, Trainer, TrainingArguments

ds_config = {
    "bf16": {"enabled": "auto"},
    "zero_optimization": {"stage": 3, "overlap_comm": True, "stage3_gather_16bit_weights_on_model_save": True},
    "gradient_accumulation_steps": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "activation_checkpointing": {  # expect: CKPT008
        "partition_activations": True,
        "cpu_checkpointing": True,
        "contiguous_memory_optimization": False,
        "number_checkpoints": None,
    },
}


def main(train_dataset):
    model = AutoModelForCausalLM.from_pretrained("meta-llama/Llama-3.2-1B")
    args = TrainingArguments("out", per_device_train_batch_size=4, bf16=True, deepspeed=ds_config)
    Trainer(model=model, args=args, train_dataset=train_dataset).train()
