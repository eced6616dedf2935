"""torch's behaviour as data: its checkpoint functions and their defaults, FSDP, what
`nn.Module`s and tensors do (dropout, running statistics, in-place writes, methods returning
`self`). Names are absolute (as imported: `torch.nn.BatchNorm2d`); each entry says where the
behaviour was read or measured."""

from __future__ import annotations

import enum
from dataclasses import dataclass

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

# Non-reentrant checkpointing nested in non-reentrant recomputes the inner region once
# from torch 2.1 on; before, the inner region runs again (CKPT005's evidence).
NESTING_SUPPORTED = VersionRange.of("torch", max="2.1")

# Library functions that run one of their arguments under torch's checkpoint: what they
# recompute is what that argument denotes, as for a project's own checkpoint wrapper
# (`ProjectIndex.checkpointed_parameter`).
@dataclass(frozen=True)
class CheckpointingHelper:
    parameter: int  # the position of the argument it runs checkpointed
    # A parameter (keyword, position) that, unless given a literal False, leaves a member of
    # that argument out of checkpointing (the rules then say nothing about the call).
    leaves_out: tuple[str, int] | None = None


# --- DDP -----------------------------------------------------------------------------------

# `DistributedDataParallel(module, find_unused_parameters=True)` marks, after each forward,
# the parameters the autograd graph from the outputs does not reach as ready; a reentrant
# checkpoint runs its region under `no_grad`, so its parameters are among them, and its
# recomputation in backward fires their hooks again. Measured on torch 2.13 (CPU, gloo, 2
# processes; CKPT006's Evidence): the first backward raises `RuntimeError: Expected to mark a
# variable ready only once. ... Parameter at index 3 with name b.bias has been marked as
# ready twice`; the non-reentrant implementation runs; `static_graph=True` (also with
# `find_unused_parameters=True`) runs; a module checkpointed twice in one forward raises the
# same error without `find_unused_parameters` too, unless `static_graph=True`.
DDP = frozenset(
    {
        "torch.nn.parallel.DistributedDataParallel",
        "torch.nn.parallel.distributed.DistributedDataParallel",
        "torch.nn.DistributedDataParallel",
    }
)
DDP_FIND_UNUSED = "find_unused_parameters"
DDP_STATIC_GRAPH = "static_graph"
# `ddp_model._set_static_graph()`: what `static_graph=True` does, called on the wrapped model
# (torch 2.13 `distributed.py`; the error's own advice).
DDP_SET_STATIC_GRAPH = "_set_static_graph"

# --- FSDP ----------------------------------------------------------------------------------

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
# --- what modules and tensors do ---------------------------------------------------------

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

# Modules that hold parameters as built by default (torch 2.13 `torch/nn/modules/`): what makes
# a checkpointed region trainable (CKPT007). Last names of classes under `torch.nn`.
PARAMETERISED_MODULES = frozenset({
    "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "Embedding", "EmbeddingBag", "LayerNorm",
    "GroupNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "PReLU",
    "MultiheadAttention", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell", "Transformer",
    "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer", "TransformerDecoderLayer",
})
# An embedding's output requires grad exactly when its weight does: its input is indices,
# which never require grad (torch 2.13: float indices raise).
EMBEDDING_MODULES = frozenset({"torch.nn.Embedding", "torch.nn.EmbeddingBag"})
# `nn.Embedding.from_pretrained(embeddings, freeze=True, ...)`: frozen unless `freeze=False`
# (torch 2.13 `nn/modules/sparse.py`: `embedding.weight.requires_grad = not freeze`).
EMBEDDING_FROM_PRETRAINED = frozenset({f"{name}.from_pretrained" for name in EMBEDDING_MODULES})
# Contexts under which nothing computed requires grad (torch 2.13 `torch/autograd/grad_mode.py`).
NO_GRAD_CONTEXTS = frozenset({"torch.no_grad", "torch.inference_mode", "torch.autograd.grad_mode.no_grad"})
# Tensor methods whose result requires grad exactly when the tensor does (their other
# arguments are shapes, dtypes, devices, indices).
GRAD_PRESERVING_METHODS = frozenset({
    "to", "float", "half", "bfloat16", "double", "cuda", "cpu", "type", "contiguous", "view", "reshape", "flatten",
    "permute", "transpose", "unsqueeze", "squeeze", "expand", "repeat", "clone", "long", "int", "unflatten",
})

# Containers whose members run in order (`nn.Sequential`) or are iterated by their owner.
CONTAINER_MODULES = frozenset({"Sequential", "ModuleList", "ModuleDict"})

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

# torch's dropout modules (torch 2.13 `nn/modules/dropout.py`).
DROPOUT_MODULES = frozenset(
    {f"torch.nn.{name}" for name in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")}
    | {f"torch.nn.modules.dropout.{name}" for name in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout")}
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
# torch's random functions with a probability (`p`, the second positional argument): none
# drawn at 0.
TORCH_DROPOUT_FUNCTIONS = frozenset(
    {f"torch.nn.functional.{name}" for name in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
                                                "feature_alpha_dropout")}
    | {"torch.dropout", "torch.bernoulli"}
)

# Modules that update running statistics in training (torch 2.13 `_BatchNorm` /
# `_InstanceNorm`): BatchNorm tracks them by default, InstanceNorm only with
# `track_running_stats=True`. Measured: `num_batches_tracked == 2` after one checkpointed
# step (tests/test_closure_rules.py).
_BATCH_NORMS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d", "LazyBatchNorm2d",
                "LazyBatchNorm3d")
_INSTANCE_NORMS = ("InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
                   "LazyInstanceNorm3d")
TORCH_NORMS_WITH_RUNNING_STATS = frozenset(
    f"{prefix}.{name}" for prefix in ("torch.nn", "torch.nn.modules.batchnorm", "torch.nn.modules.instancenorm")
    for name in (*_BATCH_NORMS, *_INSTANCE_NORMS)
)
# Tensor methods that write in place.
IN_PLACE_METHODS = frozenset({"add_", "sub_", "mul_", "div_", "copy_", "fill_", "zero_", "clamp_", "index_add_",
                              "scatter_", "masked_fill_", "lerp_", "index_copy_", "index_fill_", "masked_scatter_",
                              "scatter_add_"})
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
