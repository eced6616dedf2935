"""What third-party code does, as data: the one table the model, the rules and the recipe
checks read. Names are absolute (as imported: `torch.nn.BatchNorm2d`); each entry says where
the behaviour was read or measured. Add a library fact here, never as a branch in a rule.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace

from ckptlint.model.openmmlab import MMCV_NORMS_WITH_RUNNING_STATS
from ckptlint.model.timm_layers import NORM_ACT_WITH_RUNNING_STATS
from ckptlint.versions import VersionRange

# --- torch: activation checkpointing ----------------------------------------------------


class Reentrancy(str, enum.Enum):
    """The implementation a checkpoint call runs, as its arguments say (torch 2.13
    `torch/utils/checkpoint.py`: `use_reentrant` left out is the reentrant implementation,
    with a warning)."""

    EXPLICIT_TRUE = "use_reentrant=True"
    EXPLICIT_FALSE = "use_reentrant=False"
    IMPLICIT = "omitted (torch defaults to reentrant)"
    UNKNOWN = "not known statically"

    @property
    def is_reentrant(self) -> bool:
        return self in (Reentrancy.EXPLICIT_TRUE, Reentrancy.IMPLICIT)


# torch 2.13 `torch/utils/checkpoint.py`: both default to the reentrant implementation when
# `use_reentrant` is not passed (and warn).
TORCH_CHECKPOINT_FUNCTIONS = frozenset(
    {"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"}
)
# transformers >= 4.35 `modeling_utils.py`: `gradient_checkpointing_enable()` sets, on every
# module with a `gradient_checkpointing` attribute, `_gradient_checkpointing_func =
# functools.partial(checkpoint, **gradient_checkpointing_kwargs)`; the layers' code calls
# `self._gradient_checkpointing_func(layer.__call__, hidden_states, ...)`: its first argument
# is what torch's checkpoint runs, now and again in backward.
HF_CHECKPOINTING_ATTRIBUTE = "_gradient_checkpointing_func"
_CHECKPOINT_WRAPPER_MODULE = "torch.distributed.algorithms._checkpoint.checkpoint_wrapper"
# torch 2.13 `checkpoint_wrapper.py`: `apply_activation_checkpointing(model,
# checkpoint_wrapper_fn=checkpoint_wrapper, check_fn=..., auto_wrap_policy=...)`.
APPLY_ACTIVATION_CHECKPOINTING = frozenset(
    {
        f"{_CHECKPOINT_WRAPPER_MODULE}.apply_activation_checkpointing",
        f"{_CHECKPOINT_WRAPPER_MODULE}.apply_activation_checkpointing_wrapper",  # torch < 1.13
    }
)
# `checkpoint_wrapper(module, checkpoint_impl=CheckpointImpl.NO_REENTRANT, ...)`: non-reentrant
# by default since torch 1.13 (`checkpoint_wrapper.py`).
CHECKPOINT_WRAPPER = frozenset({f"{_CHECKPOINT_WRAPPER_MODULE}.checkpoint_wrapper"})
CHECKPOINT_IMPL_REENTRANT = f"{_CHECKPOINT_WRAPPER_MODULE}.CheckpointImpl.REENTRANT"
CHECKPOINT_IMPL_NO_REENTRANT = f"{_CHECKPOINT_WRAPPER_MODULE}.CheckpointImpl.NO_REENTRANT"
# The composable (FSDP2-era) checkpoint: always the non-reentrant implementation
# (`torch/distributed/_composable/checkpoint_activation.py`).
COMPOSABLE_CHECKPOINT = frozenset(
    {"torch.distributed._composable.checkpoint", "torch.distributed._composable.checkpoint_activation.checkpoint"}
)

# --- torch / accelerate / Lightning: FSDP -----------------------------------------------

FSDP1 = frozenset(
    {
        "torch.distributed.fsdp.FullyShardedDataParallel",
        "torch.distributed.fsdp.fully_sharded_data_parallel.FullyShardedDataParallel",
    }
)
FSDP2 = frozenset(
    {
        "torch.distributed.fsdp.fully_shard",
        "torch.distributed.fsdp._fully_shard.fully_shard",
        "torch.distributed.fsdp._fully_shard._fully_shard.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard",
        "torch.distributed._composable.fsdp.fully_shard.fully_shard",
    }
)
ACCELERATE_FSDP_PLUGIN = frozenset(
    {
        "accelerate.FullyShardedDataParallelPlugin",
        "accelerate.utils.FullyShardedDataParallelPlugin",
        "accelerate.utils.dataclasses.FullyShardedDataParallelPlugin",
    }
)
LIGHTNING_PACKAGES = ("lightning.pytorch", "pytorch_lightning", "lightning.fabric", "lightning_fabric")
LIGHTNING_FSDP_STRATEGY = frozenset(
    f"{package}.strategies{sub}.FSDPStrategy" for package in LIGHTNING_PACKAGES for sub in ("", ".fsdp")
)
# Lightning's `ModelParallelStrategy(parallelize_fn, ...)` (lightning 2.3 to 2.5
# `fabric/strategies/model_parallel.py`): `setup_module` runs `parallelize_fn(module,
# self.device_mesh)` on the module handed to `Fabric.setup(module, ...)` / `setup_module(module)`
# (`fabric.py`), where projects apply FSDP2 and activation checkpointing (litgpt's
# `finetune/lora.py`). The Trainer's strategy of that name has no such argument (it calls
# the LightningModule's `configure_model`).
LIGHTNING_MODEL_PARALLEL = frozenset(
    f"{package}.strategies{sub}.ModelParallelStrategy"
    for package in ("lightning.fabric", "lightning_fabric") for sub in ("", ".model_parallel")
)
LIGHTNING_PARALLELIZE_KEYWORD = "parallelize_fn"
LIGHTNING_FABRIC_SETUP_METHODS = frozenset({"setup", "setup_module"})
LIGHTNING_ENTRY_POINTS = frozenset(
    {"lightning.Trainer", "lightning.Fabric", "lightning.pytorch.Trainer", "pytorch_lightning.Trainer",
     "lightning.fabric.Fabric", "lightning_fabric.Fabric"}
)

# --- peft: prepare_model_for_kbit_training ---------------------------------------------------

# `prepare_model_for_kbit_training(model)` freezes the model and, only for a quantized one
# (`is_loaded_in_8bit` / `is_loaded_in_4bit`, or a GPTQ, AQLM, EETQ, HQQ, torchao
# `quantization_method`), enables input grads and gradient checkpointing; on a bf16/fp32 model
# it does neither. Read in peft 0.4.0, 0.13.2 and 0.17.1 (`peft/utils/other.py`).
# `from_pretrained` loads a checkpoint quantized without any quantization argument when its
# config carries a `quantization_config` (GPTQ, AWQ, bitsandbytes exports): a Hub id naming
# one of these is not known to load unquantized.
PRE_QUANTIZED_CHECKPOINT = re.compile(r"gptq|awq|bnb|nf4|[248]-?bit|int[248]|hqq|eetq|aqlm|quant|exl2|gguf|fp8", re.I)


# --- the same model under another name ----------------------------------------------------

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

# `nn.Module` methods that return the module itself (torch 2.13 `nn/modules/module.py`:
# `return self` ends each): `Student().train()` and `Net().to(device)` are the instance.
MODULE_METHODS_RETURNING_SELF = frozenset(
    {"to", "cuda", "cpu", "xpu", "half", "float", "bfloat16", "double", "type", "train", "eval", "requires_grad_",
     "apply", "to_empty", "share_memory"}
)

# What a function of tensors alone may call (CKPT002's regions without FSDP units, the
# entropy of logits): the functions of these libraries (not their classes), tensor methods,
# builtins, and its project's functions of the same kind; anything else may be a module it
# is handed.
TENSOR_METHODS = frozenset({
    "sum", "mean", "max", "min", "amax", "amin", "argmax", "argmin", "softmax", "log_softmax", "exp", "log",
    "logsumexp", "float", "half", "double", "bfloat16", "to", "type_as", "view", "view_as", "reshape", "transpose",
    "permute", "contiguous", "gather", "squeeze", "unsqueeze", "clamp", "clamp_min", "pow", "sqrt", "rsqrt", "abs",
    "masked_fill", "chunk", "split", "matmul", "norm", "detach", "size", "dim", "flatten", "cumsum", "tanh",
    "sigmoid", "relu", "mul", "add", "sub", "div", "neg", "expand", "expand_as", "new_zeros", "new_ones", "numel",
    "square", "scatter", "index_select", "masked_select", "where", "any", "all", "item", "tolist", "long", "int",
    "bool", "sort", "topk", "cumprod", "prod", "var", "std", "narrow", "repeat", "flip", "roll", "zero_", "fill_",
    "copy_", "add_", "mul_", "div_", "sub_", "clamp_",
})
TENSOR_BUILTINS = frozenset({"len", "range", "min", "max", "float", "int", "bool", "abs", "sum", "zip", "enumerate", "isinstance", "tuple", "list"})
TENSOR_LIBRARIES = ("torch.", "math.", "numpy.", "einops.")

# Tensor methods whose result, converted again the same way, is unchanged (`a.to(d).to(d)`
# equals `a.to(d)`): an attribute set to such a conversion of itself holds the same value
# after the recomputation as after the forward.
IDEMPOTENT_CONVERSIONS = frozenset(
    {"to", "type", "float", "half", "bfloat16", "double", "cuda", "cpu", "contiguous", "type_as"}
)
# Measured on torch 2.13: `to`, `float` and `contiguous` return the tensor itself when nothing
# changes.

# --- torch.nn: what modules hold -------------------------------------------------------------

# Containers whose members run in order (`nn.Sequential`) or are iterated by their owner.
CONTAINER_MODULES = frozenset({"Sequential", "ModuleList", "ModuleDict"})
# Other libraries' containers that are torch's with an `init_cfg` keyword: mmengine's
# (`mmengine/model/base_module.py`: `class ModuleList(BaseModule, nn.ModuleList)`, whose
# `__init__(self, modules=None, init_cfg=None)` hands `modules` to `nn.ModuleList.__init__`;
# `Sequential(*args, init_cfg=None)`, `ModuleDict(modules=None, init_cfg=None)` alike; read at
# mmengine v0.10.x), and mmcv's before 2.0 (`mmcv/runner/base_module.py`, v1.7, the same).
LIBRARY_CONTAINERS = frozenset(
    f"{module}.{name}"
    for module in ("mmengine.model", "mmengine.model.base_module", "mmcv.runner", "mmcv.runner.base_module")
    for name in CONTAINER_MODULES
)


def is_container_class(name: str) -> bool:
    """torch's `Sequential` / `ModuleList` / `ModuleDict`, or another library's same class."""
    return (name.startswith("torch.") and name.rsplit(".", 1)[-1] in CONTAINER_MODULES) or name in LIBRARY_CONTAINERS
# Dropout draws a new mask on every forward in training; `p=0` draws nothing. timm's
# DropPath (`timm/layers/drop.py`) draws one per sample.
# Functions that return the module they are given with a forward pre-hook that writes its
# buffers in place on every training forward: the legacy `spectral_norm`'s power iteration
# updates `weight_u` / `weight_v` (torch 2.13, `torch/nn/utils/spectral_norm.py`,
# `SpectralNorm.compute_weight(do_power_iteration=module.training)`). Measured on torch 2.13
# (CPU), a spectral-normed `Linear(8, 8)` under non-reentrant `checkpoint`: input gradients
# 0.09 away from the unchecked step, `weight_v` 0.26 (the recomputation runs another
# iteration from a vector that has not converged). Not the parametrization
# (`torch.nn.utils.parametrizations.spectral_norm`): it runs 15 iterations when registered,
# and the same measurement differs by 2e-7 (gradients) and 4e-6 (buffers). `weight_norm`
# keeps no such state.
STATE_UPDATING_WRAPPERS = frozenset({"torch.nn.utils.spectral_norm", "torch.nn.utils.spectral_norm.spectral_norm"})

RANDOM_MODULES = frozenset(
    {f"torch.nn.{name}" for name in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")}
    | {f"torch.nn.modules.dropout.{name}" for name in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout")}
    | {"timm.layers.DropPath", "timm.models.layers.DropPath", "timm.layers.drop.DropPath"}
)
# transformers layers that draw dropout masks in training under their configuration's
# defaults, which the usual pretrained checkpoints keep (`BertConfig().hidden_dropout_prob ==
# 0.1`, GPT-2 `resid_pdrop` 0.1, T5 `dropout_rate` 0.1, BART / mBART / Pegasus / OPT `dropout`
# 0.1, Wav2Vec2 `hidden_dropout` 0.1; read from the configs of transformers 5.17.0, the same
# in 4.46.3). Llama, Mistral, Qwen2, Gemma, Phi, Falcon, Bloom, GPT-NeoX, GPT-J, ViT, CLIP,
# Swin, Whisper and ALBERT default to 0.0 and are not listed: a layer of theirs draws nothing
# unless a project turns dropout on.
TRANSFORMERS_RANDOM_LAYERS = frozenset(
    f"transformers.models.{family}.modeling_{family}.{layer}"
    for family, layers in (
        ("bert", ("BertLayer",)), ("roberta", ("RobertaLayer",)), ("xlm_roberta", ("XLMRobertaLayer",)),
        ("electra", ("ElectraLayer",)), ("deberta_v2", ("DebertaV2Layer",)), ("distilbert", ("TransformerBlock",)),
        ("mpnet", ("MPNetLayer",)), ("longformer", ("LongformerLayer",)), ("gpt2", ("GPT2Block",)),
        ("t5", ("T5Block",)), ("mt5", ("MT5Block",)), ("bart", ("BartEncoderLayer", "BartDecoderLayer")),
        ("mbart", ("MBartEncoderLayer", "MBartDecoderLayer")),
        ("pegasus", ("PegasusEncoderLayer", "PegasusDecoderLayer")), ("opt", ("OPTDecoderLayer",)),
        ("wav2vec2", ("Wav2Vec2EncoderLayer", "Wav2Vec2EncoderLayerStableLayerNorm")),
    )
    for layer in layers
)
RANDOM_MODULES = RANDOM_MODULES | TRANSFORMERS_RANDOM_LAYERS
# The model classes of those families (`BertForMaskedLM`, `GPT2LMHeadModel`, `T5Model`; not
# `T5GemmaModel`, another family): the layers gradient checkpointing wraps.
_RANDOM_FAMILIES = {
    layer.split(".")[2]: layer
    for layer in sorted(TRANSFORMERS_RANDOM_LAYERS, key=lambda name: ("Decoder" in name, len(name), name), reverse=True)
}
_FAMILY_PREFIXES = {
    "bert": "Bert", "roberta": "Roberta", "xlm_roberta": "XLMRoberta", "electra": "Electra", "deberta_v2": "DebertaV2",
    "distilbert": "DistilBert", "mpnet": "MPNet", "longformer": "Longformer", "gpt2": "GPT2", "t5": "T5", "mt5": "MT5",
    "bart": "Bart", "mbart": "MBart", "pegasus": "Pegasus", "opt": "OPT", "wav2vec2": "Wav2Vec2",
}
_RANDOM_MODEL_CLASS = re.compile(
    r"^(?P<prefix>" + "|".join(sorted(_FAMILY_PREFIXES.values(), key=len, reverse=True))
    + r")(?:Model|LMHeadModel|EncoderModel|For[A-Z]\w*)$"
)


# The Hub checkpoints of those families, by the name after the organisation, that an Auto class
# (`AutoModelForSequenceClassification.from_pretrained("bert-base-uncased")`) loads with the
# family's dropout: transformers 5.17's configuration docstrings say the defaults give the
# configuration of `google-bert/bert-base-uncased`, `FacebookAI/roberta-base`,
# `google/distilbert-base-uncased`, `google/electra-small-discriminator`, `microsoft/mpnet-base`,
# `allenai/longformer-base-4096`, `openai-community/gpt2`, `google-t5/t5-small`,
# `google/mt5-small`, `facebook/bart-large`, `facebook/mbart-large-cc25`,
# `google/pegasus-large`, `facebook/opt-350m`, `facebook/wav2vec2-base-960h`; the other sizes
# of each release share their dropout. A name not listed (a fine-tuned copy under another
# name, `sentence-transformers/all-MiniLM-L6-v2`) says nothing.
_RANDOM_CHECKPOINTS = {
    family: re.compile(pattern)
    for family, pattern in (
        ("bert", r"bert-(base|large)-"), ("roberta", r"roberta-(base|large)\b"),
        ("xlm_roberta", r"xlm-roberta-(base|large)\b"), ("distilbert", r"distilbert-base-"),
        ("electra", r"electra-(small|base|large)-"), ("deberta_v2", r"deberta-v[23]-"), ("mpnet", r"mpnet-base$"),
        ("longformer", r"longformer-(base|large)-"), ("gpt2", r"(distil)?gpt2(-medium|-large|-xl)?$"),
        ("t5", r"t5-(small|base|large|3b|11b)$"), ("mt5", r"mt5-(small|base|large|xl|xxl)$"),
        ("bart", r"bart-(base|large)\b"), ("mbart", r"mbart-large-"), ("pegasus", r"pegasus-"),
        ("opt", r"opt-\d+(\.\d+)?[mb]$"), ("wav2vec2", r"wav2vec2-(base|large)\b"),
    )
}


def transformers_random_checkpoint(model_id: str) -> str | None:
    """The layer of the family a Hub checkpoint id names, when its layers draw dropout masks
    (`bert-base-uncased`, `google-bert/bert-base-uncased` -> `...modeling_bert.BertLayer`)."""
    name = model_id.rsplit("/", 1)[-1]
    return next((_RANDOM_FAMILIES[f] for f, pattern in _RANDOM_CHECKPOINTS.items() if pattern.match(name)), None)


def transformers_random_layer(model_class: str) -> str | None:
    """The layer of a transformers model class whose family draws dropout masks under its
    configuration's defaults (`BertForMaskedLM` -> `...modeling_bert.BertLayer`), else None."""
    match = _RANDOM_MODEL_CLASS.match(model_class.rsplit(".", 1)[-1])
    if match is None:
        return None
    family = next(f for f, prefix in _FAMILY_PREFIXES.items() if prefix == match["prefix"])
    return _RANDOM_FAMILIES.get(family)
# Random functions with a probability (`p`, the second positional argument): none drawn at 0.
DROPOUT_FUNCTIONS = frozenset(
    {f"torch.nn.functional.{name}" for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                                "feature_alpha_dropout")}
    | {"torch.dropout", "torch.bernoulli", "timm.layers.drop_path", "timm.layers.drop.drop_path"}
)
# torch's random sampling functions (the "Random sampling" section of the torch reference,
# torch 2.13: `bernoulli`, `multinomial`, `normal`, `poisson`, `rand`, `rand_like`, `randint`,
# `randint_like`, `randn`, `randn_like`, `randperm`) and `F.gumbel_softmax`: each draws from
# the global generator, so a recomputation without the saved RNG state draws other numbers
# (measured: `x + torch.randn_like(x)` before `tanh` under `checkpoint(...,
# preserve_rng_state=False)` gives other gradients than the unchecked step).
RANDOM_SAMPLING_FUNCTIONS = frozenset(
    {f"torch.{name}" for name in ("multinomial", "normal", "poisson", "rand", "rand_like", "randint", "randint_like",
                                  "randn", "randn_like", "randperm")}
    | {"torch.nn.functional.gumbel_softmax"}
)
# Tensor methods that draw random numbers in place (a hand-written `drop_path`:
# `x.new_empty(shape).bernoulli_(keep_prob)`, copied from timm into Swin, DeiT, ConvNeXt...).
RANDOM_TENSOR_METHODS = frozenset({"bernoulli_", "uniform_", "normal_", "random_", "exponential_", "geometric_",
                                   "cauchy_", "log_normal_"})
# Python's own: `OrderedDict([(name, module), ...])` is a mapping as `dict(...)` is, and the
# string methods the model evaluates on a known string before a table lookup
# (`norm.replace("_", "").lower()`, timm's `get_norm_layer`).
ORDERED_DICTS = frozenset({"collections.OrderedDict", "typing.OrderedDict"})
STRING_METHODS = frozenset({
    "lower", "upper", "strip", "lstrip", "rstrip", "replace", "removeprefix", "removesuffix", "casefold", "split",
})
# Modules that update running statistics in training (torch 2.13 `_BatchNorm` /
# `_InstanceNorm`): BatchNorm tracks them by default, InstanceNorm only with
# `track_running_stats=True`. Measured: `num_batches_tracked == 2` after one checkpointed
# step (tests/test_closure_rules.py).
_BATCH_NORMS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d", "LazyBatchNorm2d",
                "LazyBatchNorm3d")
_INSTANCE_NORMS = ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
                   "LazyInstanceNorm3d")
NORMS_WITH_RUNNING_STATS = frozenset(
    f"{prefix}.{name}" for prefix in ("torch.nn", "torch.nn.modules.batchnorm", "torch.nn.modules.instancenorm")
    for name in (*_BATCH_NORMS, *_INSTANCE_NORMS)
) | MMCV_NORMS_WITH_RUNNING_STATS | NORM_ACT_WITH_RUNNING_STATS
# Tensor methods that write in place, and container methods that mutate.
IN_PLACE_METHODS = frozenset({"add_", "sub_", "mul_", "div_", "copy_", "fill_", "zero_", "clamp_", "index_add_",
                              "scatter_", "masked_fill_", "lerp_", "index_copy_", "index_fill_", "masked_scatter_",
                              "scatter_add_"})
CONTAINER_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "pop", "clear"})
# In-place methods that give the same tensor when applied again with the same arguments
# (`clamp_(max=m)` of a clamped tensor, `fill_(0)`, `zero_()`): with fixed arguments, the
# recomputation writes the value the forward wrote. Measured on torch 2.13: k-diffusion's
# `self.scale.clamp_(max=self.max_scale)` at the start of a checkpointed forward gives the
# gradients of the plain forward with either implementation.
IDEMPOTENT_IN_PLACE_METHODS = frozenset({"clamp_", "fill_", "zero_"})
# `nn.Module` methods that yield its child modules (every attribute holding a module).
CHILDREN_METHODS = frozenset({"children", "named_children", "modules", "named_modules"})
# `nn.Module` methods that register a child under a (possibly computed) name.
REGISTERING_METHODS = frozenset({"add_module", "register_module", "__setattr__"})

# --- transformers / TRL ------------------------------------------------------------------

# The argument classes whose `gradient_checkpointing` / `fsdp` fields the Trainer reads
# (TRL's configs subclass TrainingArguments).
TRAINING_ARGUMENTS_CLASSES = frozenset(
    {
        "transformers.TrainingArguments",
        "transformers.training_args.TrainingArguments",
        "transformers.Seq2SeqTrainingArguments",
        "transformers.training_args_seq2seq.Seq2SeqTrainingArguments",
        *(
            f"trl.{name}"
            for name in (
                "SFTConfig", "DPOConfig", "GRPOConfig", "RewardConfig", "ORPOConfig", "KTOConfig",
                "PPOConfig", "RLOOConfig", "CPOConfig", "BCOConfig", "GKDConfig", "PRMConfig",
                "OnlineDPOConfig", "XPOConfig", "NashMDConfig", "AlignPropConfig", "DDPOConfig",
            )
        ),
    }
)
# transformers before 5.0 turns `gradient_checkpointing_enable()` without kwargs into
# `{"use_reentrant": True}`; 5.0 into `{"use_reentrant": False}` (EVIDENCE Q4).
REENTRANT_DEFAULT_VERSIONS = VersionRange.of("transformers", max="5.0")
# Non-reentrant checkpointing nested in non-reentrant recomputes the inner region once
# from torch 2.1 on; before, the inner region runs again (CKPT005's evidence).
NESTING_SUPPORTED = VersionRange.of("torch", max="2.1")
# TRL's configs turn gradient checkpointing on by default from 0.22 (SFTConfig; every
# trainer's config from 1.0).
TRL_CHECKPOINTING_DEFAULT = VersionRange.of("trl", min="0.22")
# TRL's trainers (`trl/__init__.py` of 0.28.0 exports these; GKD subclasses SFT, XPO and
# NashMD OnlineDPO, MiniLLM GRPO).
TRL_TRAINERS = frozenset(
    f"{name}Trainer"
    for name in ("SFT", "DPO", "GRPO", "Reward", "RLOO", "KTO", "BCO", "CPO", "ORPO", "PPO", "PRM",
                 "OnlineDPO", "GKD", "XPO", "NashMD", "MiniLLM", "TPO")
)
# TRL defaults Hugging Face checkpointing to non-reentrant where transformers does not
# (< 5.0): `args.gradient_checkpointing_kwargs = args.gradient_checkpointing_kwargs or {}`,
# then `.setdefault("use_reentrant", False)` (a `use_reentrant` the user gives stays). Read in
# trl's sources at each tag from v0.26.0 to v1.9.0: absent in 0.26 (but for GRPO and RLOO,
# which force True under PEFT + ZeRO-3); 0.27.x in every config's `__post_init__`
# (`SFTConfig`, `DPOConfig`, `GRPOConfig`, ... and their subclasses); from 0.28.0 in every
# trainer's `__init__` instead (`TRL_TRAINERS`), so a config alone no longer does it.
TRL_NON_REENTRANT_CONFIGS = VersionRange.of("trl", min="0.27.0", max="0.28.0")
TRL_NON_REENTRANT_TRAINERS = VersionRange.of("trl", min="0.28.0")
TRL_NON_REENTRANT_DEFAULT = VersionRange.of("trl", min="0.27.0")  # a TRL config handed to a TRL trainer


def is_trl_name(name: str, names: frozenset[str]) -> bool:
    """`trl.SFTTrainer`, `trl.trainer.sft_trainer.SFTTrainer`: a TRL class of `names`."""
    return name.startswith("trl.") and name.rsplit(".", 1)[-1] in names


TRL_CONFIGS = frozenset(name.removeprefix("trl.") for name in TRAINING_ARGUMENTS_CLASSES if name.startswith("trl."))
TRANSFORMERS_TRAINERS = frozenset(
    {
        "transformers.Trainer", "transformers.trainer.Trainer", "transformers.Seq2SeqTrainer",
        "transformers.trainer_seq2seq.Seq2SeqTrainer",
    }
)

# How transformers names its model classes (`LlamaForCausalLM`, `AutoModelForSeq2SeqLM`,
# `BertModel`, `CLIPTextModelWithProjection`, `AutoBackbone`), and what it does not call a
# model (configs, tokenizers, processors, outputs, trainers; the TF and Flax twins).
MODEL_CLASS_NAME = re.compile(r"^(Auto\w*Model\w*|\w+(Model|ModelWithProjection|For[A-Z]\w*|Backbone))$")
NOT_MODEL_NAME = re.compile(r"(Config|Tokenizer\w*|Processor|FeatureExtractor|Output\w*|Mixin|Args|Arguments|Trainer)$")


def is_model_class_name(name: str) -> bool:
    short = name.rsplit(".", 1)[-1]
    return bool(MODEL_CLASS_NAME.match(short)) and not NOT_MODEL_NAME.search(short) and not short.startswith(("TF", "Flax"))


# The parts of a model that are its input embeddings (`model.embed_tokens`, GPT-2's `wte`,
# T5's `shared`, `get_input_embeddings()`): input grads are enabled through them.
EMBEDDING_PARTS = re.compile(r"embed|^wte$|^shared$|^get_input_embeddings$", re.IGNORECASE)


# --- peft -----------------------------------------------------------------------------------

GET_PEFT_MODEL = frozenset({"peft.get_peft_model", "peft.mapping.get_peft_model", "peft.mapping_func.get_peft_model"})
# peft `tuners/lora/config.py`: `LoraConfig(lora_dropout=0.0, target_modules=None, ...)`; each
# LoRA layer's `update_layer` makes `lora_dropout[adapter]` an `nn.Dropout(p=lora_dropout)` when
# `lora_dropout > 0.0` (else `nn.Identity()`) and applies it to the layer's input in training
# (`tuners/lora/layer.py`, peft 0.6 to 0.13): adapters on the projections inside a decoder
# layer draw a dropout mask each time the layer runs.
LORA_CONFIGS = frozenset({"peft.LoraConfig", "peft.tuners.LoraConfig", "peft.tuners.lora.LoraConfig",
                          "peft.tuners.lora.config.LoraConfig"})
# Modules LoRA may target that sit outside the layer stack gradient checkpointing wraps.
OUTSIDE_CHECKPOINTED_LAYERS = frozenset({"lm_head", "embed_tokens", "wte", "wpe", "word_embeddings", "embed_out",
                                         "score", "classifier", "shared"})
# peft (0.17.1, 0.21.2) `utils/other.py` `_set_trainable`: each module whose name ends with an
# entry of `modules_to_save` is wrapped in a trainable copy; `trainable_token_indices` (a list:
# the input embeddings; a dict: the named embedding modules) makes some of its rows trainable.
# Either on the input embeddings makes their output require grad, so a reentrant checkpoint's
# first layer records a gradient path (measured, torch 2.13: CKPT021's Evidence).
PEFT_TRAINABLE_MODULES = ("modules_to_save", "trainable_token_indices")


def is_peft_config(callee: str) -> bool:
    """A PEFT adapter configuration class (`peft.LoraConfig`, `peft.tuners.lora.LoraConfig`)."""
    return callee.startswith("peft.") and callee.endswith("Config") and callee.rsplit(".", 1)[-1] != "PeftConfig"


def trains_input_embeddings(keyword: str, names: tuple[str, ...] | None) -> bool:
    """Whether a PEFT config keyword of `PEFT_TRAINABLE_MODULES` makes the input embeddings
    trainable, from the module names it lists (`names`: None when the value is a bare list of
    token indices, which peft applies to the input embeddings). GPT-NeoX's `embed_out` is its
    output head."""
    if keyword == "trainable_token_indices" and names is None:
        return True
    return any(EMBEDDING_PARTS.search(short) and short != "embed_out" for short in (n.rsplit(".", 1)[-1] for n in names or ()))


# peft 0.13 `utils/other.py`: `prepare_model_for_kbit_training(model,
# use_gradient_checkpointing=True, gradient_checkpointing_kwargs=None)` enables gradient
# checkpointing and input grads.
PREPARE_FOR_KBIT = frozenset(
    {
        f"peft{module}.{function}"
        for module in ("", ".utils", ".utils.other")
        for function in ("prepare_model_for_kbit_training", "prepare_model_for_int8_training")
    }
)

# --- where library code starts ----------------------------------------------------------

# Library functions whose result the model follows (`ckptlint.model.denotation`): every
# other library function returns nothing a rule looks at (a tensor).
# Functions that replace every `BatchNorm2d` / `SyncBatchNorm` below the module they are given
# by a `FrozenBatchNorm2d` (buffers only, normalising with fixed statistics; in place where the
# module is not itself a BatchNorm), read from their sources: detectron2's classmethod
# (`detectron2/layers/batch_norm.py`, re-exported by `detectron2.layers`), timm's
# `freeze_batch_norm_2d` (`timm/layers/norm_act.py`, re-exported by `timm.layers`, and by
# `timm.utils` through `timm/utils/model.py`). A project's own copy of either is recognised by
# its body (`ckptlint.model.norm_freezing.converted_parameter`).
BATCHNORM_FREEZING_CONVERTERS = frozenset({
    "detectron2.layers.FrozenBatchNorm2d.convert_frozen_batchnorm",
    "detectron2.layers.batch_norm.FrozenBatchNorm2d.convert_frozen_batchnorm",
    "timm.layers.freeze_batch_norm_2d", "timm.layers.norm_act.freeze_batch_norm_2d",
    "timm.utils.freeze_batch_norm_2d", "timm.utils.model.freeze_batch_norm_2d",
})
INTERPRETED_FUNCTIONS = frozenset({"functools.partial", "itertools.chain", "itertools.chain.from_iterable"}) | STATE_UPDATING_WRAPPERS

# Calls into these are not the project's: what they do to a model is in the tables above
# or unknown.
LIBRARY_PREFIXES = (
    "torch.", "transformers.", "peft.", "accelerate.", "trl.", "lightning", "pytorch_lightning.", "deepspeed.",
    "functools.", "builtins.", "numpy.", "os.", "sys.", "logging.", "typing.", "math.", "json.", "wandb.",
)


# --- timm ----------------------------------------------------------------------------------

# Library functions that run one of their arguments under torch's checkpoint: what they
# recompute is what that argument denotes, as for a project's own checkpoint wrapper
# (`ProjectIndex.checkpointed_parameter`).
@dataclass(frozen=True)
class CheckpointingHelper:
    parameter: int  # the position of the argument it runs checkpointed
    # A parameter (keyword, position) that, unless given a literal False, leaves a member of
    # that argument out of checkpointing (the rules then say nothing about the call).
    leaves_out: tuple[str, int] | None = None


# timm's `checkpoint_seq(functions, x, every=1, flatten=False, skip_last=False, ...)` runs the
# members of `functions` (an `nn.Sequential`'s children, a list, `self.children()`) through
# `torch.utils.checkpoint.checkpoint` in segments of `every`; `skip_last=True` runs the last
# one plainly. Read in timm 0.6.13 (`timm/models/helpers.py:704`, not exported by
# `timm.models`), 0.9.16 and 1.0.9 (`timm/models/_manipulate.py:186`, exported by
# `timm.models`, and by `timm.models.helpers` through `from ._manipulate import *`), 1.0.15 and
# 1.0.31 (`_manipulate.py:212`, `:214`). Up to 1.0.9 it passes only `preserve_rng_state`
# (torch's reentrant default); 1.0.31 passes `use_reentrant=use_reentrant_ckpt()`, False unless
# TIMM_REENTRANT_CKPT is set (`timm/layers/config.py`): either way, the same is recomputed.
# DeepSpeed's `checkpoint(function, *args)` and `non_reentrant_checkpoint(function, *args)`
# (0.16.4 `deepspeed/runtime/activation_checkpointing/checkpointing.py:948`, `:704`; the
# module is `deepspeed.checkpointing`) run `function` again in backward (`CheckpointFunction.
# backward`, line 654), with the RNG states of the forward restored: what it runs is recomputed,
# its randomness is not redrawn. Its own reentrancy is no torch `use_reentrant` question.
LIBRARY_CHECKPOINTING_HELPERS = {
    **{
        name: CheckpointingHelper(0, leaves_out=("skip_last", 4))
        for name in (
            "timm.models.checkpoint_seq", "timm.models._manipulate.checkpoint_seq", "timm.models.helpers.checkpoint_seq",
        )
    },
    **{
        f"{module}.{function}": CheckpointingHelper(0)
        for module in ("deepspeed.checkpointing", "deepspeed.runtime.activation_checkpointing.checkpointing")
        for function in ("checkpoint", "non_reentrant_checkpoint")
    },
}


# The attributes transformers models keep their layer stacks in (`LlamaModel.layers`,
# `BertEncoder.layer`, `GPT2Model.h`, `T5Stack.block`, CLIP's `encoder.layers`, timm-style
# `blocks`): what gradient checkpointing wraps.
LAYER_STACKS = frozenset({"layers", "layer", "h", "block", "blocks"})


# --- transformers: what a model class's name says -------------------------------------------

# --- model classes -----------------------------------------------------------------------


class MainInput(str, enum.Enum):
    """A model's `main_input_name`, as far as transformers' input-grads logic cares."""

    INPUT_IDS = "input_ids"
    OTHER = "not input_ids"  # pixel_values, input_features, input_values...
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ModelClass:
    """What a model's class says about it."""

    name: str  # as resolved (`transformers.AutoModelForCausalLM`), or as written
    generative: bool | None  # decodes with a KV cache (decoder or encoder-decoder)
    main_input: MainInput

    @property
    def short_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


# Generative heads: a decoder (or encoder-decoder) that builds a KV cache when `use_cache`.
_GENERATIVE_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "LMHeadModel", "ForSeq2SeqLM", "ForSpeechSeq2Seq")
_GENERATIVE_AUTO = frozenset(
    {
        "AutoModelForCausalLM", "AutoModelForSeq2SeqLM", "AutoModelForVision2Seq", "AutoModelForImageTextToText",
        "AutoModelForSpeechSeq2Seq", "AutoPeftModelForCausalLM", "AutoPeftModelForSeq2SeqLM",
    }
)
# LM heads whose configs have no `use_cache` (XLNet has `use_mems`): no KV cache to turn off.
_NO_CACHE_PREFIXES = ("XLNet", "OpenAIGPT", "XLM", "Flaubert")
# Heads and towers whose `main_input_name` is not `input_ids` (checked against transformers'
# own classes in tests/test_hf_rules.py); the exceptions are text models with such heads.
# Not AutoModelForSpeechSeq2Seq: half of what it maps to in 5.17 (Voxtral, Granite Speech...)
# takes `input_ids`.
_OTHER_INPUT_SUFFIXES = (
    "ForImageClassification", "ForSemanticSegmentation", "ForObjectDetection", "ForDepthEstimation", "ForCTC",
    "ForAudioClassification", "ForMaskedImageModeling", "ForVideoClassification", "ForUniversalSegmentation",
    "ForInstanceSegmentation", "ForKeypointDetection", "Backbone", "ForAudioFrameClassification", "ForXVector",
    "ForImageSegmentation", "ForImageSuperResolution",
)
_TEXT_WITH_IMAGE_HEADS = ("ImageGPT", "ShieldGemma2", "OwlViT", "Owlv2")
_OTHER_INPUT_FAMILIES = re.compile(
    r"^(ViT(?!s)|ViTMAE|ViTMSN|Deit|DeiT|Beit|BEiT|Swin|Swinv2|ConvNext|ConvNextV2|Dinov2|CLIPVision|SiglipVision|"
    r"Siglip2Vision|Whisper(?!ForCausalLM)|Wav2Vec2|Hubert|WavLM|Speech2Text(?!ForCausalLM))"
)
_OTHER_INPUT_AUTO = frozenset(
    {
        "AutoModelForImageClassification", "AutoModelForSemanticSegmentation", "AutoModelForObjectDetection",
        "AutoModelForDepthEstimation", "AutoModelForCTC", "AutoModelForAudioClassification",
        "AutoModelForVideoClassification", "AutoModelForMaskedImageModeling",
        "AutoModelForImageSegmentation", "AutoModelForInstanceSegmentation", "AutoModelForUniversalSegmentation",
        "AutoModelForKeypointDetection", "AutoModelForAudioFrameClassification", "AutoModelForAudioXVector",
        "AutoBackbone",
    }
)
_INPUT_IDS_SUFFIXES = ("ForCausalLM", "LMHeadModel", "ForTokenClassification", "ForQuestionAnswering", "ForMultipleChoice")


def classify_model_class(name: str, *, main_input_name: str | None = None) -> ModelClass:
    """A model class by its (qualified) name; `main_input_name` when its class body says."""
    short = name.rsplit(".", 1)[-1]
    if short in _GENERATIVE_AUTO:
        generative: bool | None = True
    elif short.endswith(_GENERATIVE_SUFFIXES):
        generative = not short.startswith(_NO_CACHE_PREFIXES)
    elif short.startswith("Auto") and short.endswith("Model"):
        generative = None  # AutoModel / AutoPeftModel: any architecture, decoders included
    else:
        generative = None if short.endswith("Model") else False
    if main_input_name is not None:
        main_input = MainInput.INPUT_IDS if main_input_name == "input_ids" else MainInput.OTHER
    elif short in _OTHER_INPUT_AUTO or (
        (short.endswith(_OTHER_INPUT_SUFFIXES) or _OTHER_INPUT_FAMILIES.match(short))
        and not short.startswith(_TEXT_WITH_IMAGE_HEADS)
    ):
        main_input = MainInput.OTHER
    elif short.endswith(_INPUT_IDS_SUFFIXES) or short in ("AutoModelForCausalLM", "AutoPeftModelForCausalLM"):
        main_input = MainInput.INPUT_IDS
    else:
        main_input = MainInput.UNKNOWN
    return ModelClass(name, generative, main_input)



# Auto classes whose families differ in main input, where a literal checkpoint id names the
# family: transformers 5.17 maps AutoModelForSpeechSeq2Seq to Whisper, Speech2Text and
# SeamlessM4T heads (`input_features`) but also to Voxtral or Granite Speech (`input_ids`);
# "openai/whisper-small", "facebook/s2t-small-librispeech-asr" load the former.
_CHECKPOINT_FAMILIES = {
    "AutoModelForSpeechSeq2Seq": re.compile(r"whisper|speech[-_]?to[-_]?text|(^|/)s2t-|seamless-m4t", re.IGNORECASE),
}


def with_checkpoint(model_class: ModelClass, checkpoint: str) -> ModelClass:
    """`model_class` loaded from the literal checkpoint id `checkpoint`: its main input where
    the id names a family the auto class maps to a head taking other inputs."""
    family = _CHECKPOINT_FAMILIES.get(model_class.short_name)
    if model_class.main_input is MainInput.UNKNOWN and family is not None and family.search(checkpoint):
        return replace(model_class, main_input=MainInput.OTHER)
    return model_class


ADAPTER_METHODS = frozenset({"add_adapter", "load_adapter"})
# Methods of other objects that hand back the models given to them, wrapped (accelerate's
# `prepare`, Lightning Fabric's `setup`).
WRAPPING_METHODS = frozenset({"prepare", "prepare_model", "unwrap_model", "setup", "setup_module"})
HF_LIBRARY_ROOTS = ("transformers", "peft", "trl", "torch", "accelerate", "diffusers")
