# Settings taken from options are not known to be off: the section asks for them, and nothing applies it.
# ckptlint-case: column=9
import argparse

import deepspeed


def ds_config(args: argparse.Namespace) -> dict:
    return {
        "train_micro_batch_size_per_gpu": args.micro_batch_size,
        "zero_optimization": {"stage": args.zero_stage},
        "activation_checkpointing": {"partition_activations": args.partition_activations},  # expect: CKPT008
    }


def setup(model, args):
    return deepspeed.initialize(model=model, model_parameters=model.parameters(), config=ds_config(args))
