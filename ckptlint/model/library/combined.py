"""Facts that hold of several libraries at once, gathered from theirs: what draws random
numbers or keeps running statistics in training, what hands back the model it is given, the
functions that run an argument under torch's checkpoint, and where library code starts."""

from __future__ import annotations

from ckptlint.model.library.deepspeed import DEEPSPEED_CHECKPOINTING_HELPERS
from ckptlint.model.library.openmmlab import LIBRARY_CONTAINERS, MMCV_NORMS_WITH_RUNNING_STATS
from ckptlint.model.library.timm import (
    NORM_ACT_WITH_RUNNING_STATS, TIMM_CHECKPOINTING_HELPERS, TIMM_DROPOUT_FUNCTIONS, TIMM_RANDOM_MODULES,
)
from ckptlint.model.library.torch import (
    CONTAINER_MODULES, DROPOUT_MODULES, STATE_UPDATING_WRAPPERS, TORCH_DROPOUT_FUNCTIONS, TORCH_NORMS_WITH_RUNNING_STATS,
)
from ckptlint.model.library.transformers import TRANSFORMERS_RANDOM_LAYERS, TRANSFORMERS_TRAINING_ARGUMENTS
from ckptlint.model.library.trl import TRL_CONFIG_CLASSES

# The argument classes whose `gradient_checkpointing` / `fsdp` fields the Trainer reads
# (TRL's configs subclass TrainingArguments).
TRAINING_ARGUMENTS_CLASSES = TRANSFORMERS_TRAINING_ARGUMENTS | TRL_CONFIG_CLASSES

# Modules that draw random numbers in training: Dropout draws a new mask on every forward
# (`p=0` draws nothing), timm's DropPath one per sample, and the transformers layers whose
# configuration's defaults keep dropout on.
RANDOM_MODULES = DROPOUT_MODULES | TIMM_RANDOM_MODULES | TRANSFORMERS_RANDOM_LAYERS
# Random functions with a probability (`p`, the second positional argument): none drawn at 0.
DROPOUT_FUNCTIONS = TORCH_DROPOUT_FUNCTIONS | TIMM_DROPOUT_FUNCTIONS
# Modules that update running statistics in training: torch's BatchNorm / InstanceNorm,
# mmcv's SyncBatchNorm, timm's BatchNorm + activation layers.
NORMS_WITH_RUNNING_STATS = TORCH_NORMS_WITH_RUNNING_STATS | MMCV_NORMS_WITH_RUNNING_STATS | NORM_ACT_WITH_RUNNING_STATS


def is_container_class(name: str) -> bool:
    """torch's `Sequential` / `ModuleList` / `ModuleDict`, or another library's same class."""
    return (name.startswith("torch.") and name.rsplit(".", 1)[-1] in CONTAINER_MODULES) or name in LIBRARY_CONTAINERS


# Library functions that run one of their arguments under torch's checkpoint: what they
# recompute is what that argument denotes, as for a project's own checkpoint wrapper
# (`ProjectIndex.checkpointed_parameter`): timm's `checkpoint_seq`, DeepSpeed's checkpoint.
LIBRARY_CHECKPOINTING_HELPERS = {**TIMM_CHECKPOINTING_HELPERS, **DEEPSPEED_CHECKPOINTING_HELPERS}

# Calls that hand back the model they are given, possibly wrapped, sharing its layers: a
# name bound from one names the same model (`model = torch.compile(model)`). peft's
# `get_peft_model` wraps it in a PeftModel around the same base layers (peft 0.13
# `mapping.py`); FSDP1 wraps it in place (its parameters are flattened, the modules stay).
SAME_MODEL_FUNCTIONS = frozenset(
    {
        "torch.compile", "torch.nn.parallel.DistributedDataParallel", "torch.nn.DataParallel",
        "torch.nn.parallel.DataParallel", "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.distributed.fsdp.FullyShardedDataParallel", "peft.get_peft_model",
        "peft.prepare_model_for_kbit_training",
    }
)
# Methods that return the model they are called on (`nn.Module.to/cuda/train/...` return
# `self`), or a part sharing its layers (`PeftModel.get_base_model`, DDP's `.module`).
SAME_MODEL_METHODS = frozenset(
    {"to", "cuda", "cpu", "half", "float", "bfloat16", "double", "train", "eval", "requires_grad_", "get_base_model",
     "unwrap_model", "module"}
)

# Methods that run backward on what they are given: `loss.backward()`, Lightning's
# `self.manual_backward(loss)`, accelerate's `accelerator.backward(loss)`.
BACKWARD_METHODS = frozenset({"backward", "manual_backward"})

# Methods of other objects that hand back the models given to them, wrapped (accelerate's
# `prepare`, Lightning Fabric's `setup`).
WRAPPING_METHODS = frozenset({"prepare", "prepare_model", "unwrap_model", "setup", "setup_module"})

# --- where library code starts ----------------------------------------------------------

# Functions that replace every `BatchNorm2d` / `SyncBatchNorm` below the module they are given
# by a `FrozenBatchNorm2d` (buffers only, normalising with fixed statistics; in place where the
# module is not itself a BatchNorm), read from their sources: detectron2's classmethod
# (`detectron2/layers/batch_norm.py`, re-exported by `detectron2.layers`), timm's
# `freeze_batch_norm_2d` (`timm/layers/norm_act.py`, re-exported by `timm.layers`, and by
# `timm.utils` through `timm/utils/model.py`). A project's own copy of either is recognised by
# its body (`ckptlint.model.file_facts.norm_freezing.converted_parameter`).
BATCHNORM_FREEZING_CONVERTERS = frozenset({
    "detectron2.layers.FrozenBatchNorm2d.convert_frozen_batchnorm",
    "detectron2.layers.batch_norm.FrozenBatchNorm2d.convert_frozen_batchnorm",
    "timm.layers.freeze_batch_norm_2d", "timm.layers.norm_act.freeze_batch_norm_2d",
    "timm.utils.freeze_batch_norm_2d", "timm.utils.model.freeze_batch_norm_2d",
})
# Library functions whose result the model follows (`ckptlint.model.evaluation.denotation`): every
# other library function returns nothing a rule looks at (a tensor).
INTERPRETED_FUNCTIONS = frozenset({"functools.partial", "itertools.chain", "itertools.chain.from_iterable"}) | STATE_UPDATING_WRAPPERS

# Calls into these are not the project's: what they do to a model is in the tables above
# or unknown.
LIBRARY_PREFIXES = (
    "torch.", "transformers.", "peft.", "accelerate.", "trl.", "lightning", "pytorch_lightning.", "deepspeed.",
    "functools.", "builtins.", "numpy.", "os.", "sys.", "logging.", "typing.", "math.", "json.", "wandb.",
)
HF_LIBRARY_ROOTS = ("transformers", "peft", "trl", "torch", "accelerate", "diffusers")
