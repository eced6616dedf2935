# accelerate's FSDP plugin: non-reentrant on both sides, a plugin without checkpointing, an unprepared model.
# accelerate's FSDP plugin: non-reentrant on both sides (transformers >= 5.0) recomputes
# once; a plugin without activation checkpointing; a model this accelerator never prepares.
# ckptlint-case: target-version=transformers=5.17
# ckptlint-case: target-version=torch=2.13

from accelerate import Accelerator, FullyShardedDataParallelPlugin
from transformers import AutoModelForCausalLM

def main(loader):
    accelerator = Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(activation_checkpointing=True))
    model = AutoModelForCausalLM.from_pretrained("m", use_cache=False)
    model.gradient_checkpointing_enable()
    model = accelerator.prepare(model)

def plain(loader):
    accelerator = Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(activation_checkpointing=False))
    model = AutoModelForCausalLM.from_pretrained("m", use_cache=False)
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    model = accelerator.prepare(model)

def teacher(loader):
    accelerator = Accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(activation_checkpointing=True))
    student = AutoModelForCausalLM.from_pretrained("s", use_cache=False)
    teacher = AutoModelForCausalLM.from_pretrained("t")
    teacher.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": True})
    student = accelerator.prepare(student)
