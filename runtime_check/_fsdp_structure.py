"""What FSDP did to a model: its units, how they nest with checkpoint wrappers, what each
rank holds; and the full gradients, gathered from the shards.

Notation for the nesting: `FSDP(Block)` is an FSDP1 `FullyShardedDataParallel` unit around a
`Block`; `fully_shard(Block)` a module sharded by FSDP2; `CheckpointWrapper(Block)` a
`checkpoint_wrapper` / `apply_activation_checkpointing` wrapper. EVIDENCE Q5: with the
checkpoint wrapper applied before the FSDP1 auto-wrap, the policy still finds every `Block`,
so the count of units stays the same; what changes is the nesting,
`CheckpointWrapper(FSDP(Block))` instead of `FSDP(CheckpointWrapper(Block))`.
"""

from __future__ import annotations

from collections import Counter

import torch
import torch.distributed as dist
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import ActivationWrapper, CheckpointWrapper
from torch.distributed.fsdp import FSDPModule
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
from torch.distributed.tensor import DTensor

from ckptlint.runtime_check._rank_records import ShardingStructure
from ckptlint.runtime_check._regions import clean_name
from ckptlint.runtime_check._distributed_types import UnitNesting

# Attribute names the wrappers insert into qualified names; users' names leave them out.
FSDP1, FSDP2 = "FSDP1", "FSDP2"


def is_fsdp1_unit(module: torch.nn.Module) -> bool:
    return isinstance(module, FSDP)


def is_fsdp2_unit(module: torch.nn.Module) -> bool:
    return isinstance(module, FSDPModule)


def is_unit(module: torch.nn.Module) -> bool:
    return is_fsdp1_unit(module) or is_fsdp2_unit(module)


def _user_class(module: torch.nn.Module) -> type:
    """FSDP2 swaps a module's class for `FSDP<Class>(FSDPModule, Class)`: the user's class."""
    cls = type(module)
    if is_fsdp2_unit(module):
        for base in cls.__bases__:
            if base is not FSDPModule:
                return base
    return cls


def describe_nesting(module: torch.nn.Module) -> str:
    """The wrapper chain from `module` down to the first module that is not a wrapper."""
    if is_fsdp1_unit(module):
        return f"FSDP({describe_nesting(module._fsdp_wrapped_module)})"
    if isinstance(module, ActivationWrapper):
        inner = describe_nesting(module._checkpoint_wrapped_module)
        text = f"{_user_class(module).__name__}({inner})"
    else:
        text = _user_class(module).__name__
    return f"fully_shard({text})" if is_fsdp2_unit(module) else text


def model_class_name(model: torch.nn.Module) -> str:
    """The user's class of the model, under any FSDP1 and checkpoint wrappers."""
    while (child := _wrapped_child(model)) is not None:
        model = child
    return _user_class(model).__name__


def _wrapped_child(module: torch.nn.Module) -> torch.nn.Module | None:
    if is_fsdp1_unit(module):
        return module._fsdp_wrapped_module
    if isinstance(module, ActivationWrapper):
        return module._checkpoint_wrapped_module
    return None


def sharding_structure(model: torch.nn.Module) -> ShardingStructure:
    modules = list(model.named_modules())
    wrapped_by: dict[int, torch.nn.Module] = {}
    for _, module in modules:
        child = _wrapped_child(module)
        if child is not None:
            wrapped_by[id(child)] = module
    chains: dict[str, list[str]] = {}
    seen_tops: set[int] = set()
    versions: set[str] = set()
    units = 0
    for name, module in modules:
        if not is_unit(module):
            continue
        units += 1
        versions.add(FSDP1 if is_fsdp1_unit(module) else FSDP2)
        top = module
        while id(top) in wrapped_by:
            top = wrapped_by[id(top)]
        if id(top) in seen_tops:
            continue
        seen_tops.add(id(top))
        top_name = next(n for n, m in modules if m is top)
        chains.setdefault(describe_nesting(top), []).append(clean_name(top_name) or "(model)")
    outside = [
        clean_name(name) or "(model)"
        for name, module in modules
        if isinstance(module, CheckpointWrapper) and is_fsdp1_unit(module._checkpoint_wrapped_module)
    ]
    local, full = _parameter_bytes(model)
    parameters = [p for p in model.parameters() if p.requires_grad] or list(model.parameters())
    dtypes = Counter(str(p.dtype).replace("torch.", "") for p in parameters if p.is_floating_point())
    return ShardingStructure(
        model=model_class_name(model),
        device=str(parameters[0].device) if parameters else "cpu",
        dtype=dtypes.most_common(1)[0][0] if dtypes else "float32",
        versions=tuple(sorted(versions)),
        units=units,
        nesting=tuple(UnitNesting(pattern, len(names), names[0]) for pattern, names in chains.items()),
        parameter_bytes=local,
        full_parameter_bytes=full,
        wrappers_outside_fsdp1_units=tuple(outside),
    )


def _parameter_bytes(model: torch.nn.Module) -> tuple[int, int]:
    """(bytes this rank holds, bytes of the whole model) over every parameter once."""
    local = full = 0
    counted: set[int] = set()
    flat_parameters = []
    for module in model.modules():
        if is_fsdp1_unit(module):
            handle = getattr(module, "_handle", None)
            if handle is not None and id(handle.flat_param) not in counted:
                counted.add(id(handle.flat_param))
                flat_parameters.append(handle.flat_param)
    for flat in flat_parameters:
        size = flat.element_size()
        local += flat.numel() * size
        full += flat._unpadded_unsharded_size.numel() * size
        # With use_orig_params the original parameters are views into the flat parameter.
        counted.update(id(p) for p in getattr(flat, "_params", None) or ())
    for parameter in model.parameters():
        if id(parameter) in counted:
            continue
        counted.add(id(parameter))
        size = parameter.element_size()
        if isinstance(parameter, DTensor):
            local += parameter.to_local().numel() * size
        else:
            local += parameter.numel() * size
        full += parameter.numel() * size
    return local, full


def compute_dtypes(model: torch.nn.Module) -> set[torch.dtype]:
    """The dtypes FSDP's mixed precision computes in (`MixedPrecision.param_dtype` for FSDP1,
    `MixedPrecisionPolicy.param_dtype` for FSDP2), where set."""
    found = set()
    for module in model.modules():
        if is_fsdp1_unit(module):
            policy = getattr(module, "mixed_precision", None)
        elif is_fsdp2_unit(module):
            policy = getattr(module._get_fsdp_state(), "_mp_policy", None)
        else:
            continue
        dtype = getattr(policy, "param_dtype", None)
        if dtype is not None:
            found.add(dtype)
    return found


# --- where the checkpointed regions sit ---------------------------------------------------------


def enclosing_units(model: torch.nn.Module) -> dict[int, tuple[str, bool]]:
    """id(module) -> (clean name of the innermost FSDP unit holding it, whether that unit
    is FSDP1). A unit holds itself."""
    holder: dict[int, tuple[str, bool]] = {}
    for name, module in model.named_modules():  # outer units first: inner ones overwrite
        if is_unit(module):
            entry = (clean_name(name) or "(model)", is_fsdp1_unit(module))
            for inner in module.modules():
                holder[id(inner)] = entry
    return holder


# --- full gradients ---------------------------------------------------------------------------


def gather_full_gradients(model: torch.nn.Module) -> dict[str, torch.Tensor | None]:
    """Every parameter's full gradient, by clean name, on every rank (a collective: all ranks
    call it together). FSDP1: `summon_full_params(with_grads=True)`, or, for units built with
    `use_orig_params=False` (which it does not support), the flat gradients all-gathered and
    split as FSDP splits the flat parameter; FSDP2: `full_tensor()` of each DTensor gradient."""
    grads: dict[str, torch.Tensor | None] = {}
    fsdp1_units = [m for m in model.modules() if is_fsdp1_unit(m)]
    if fsdp1_units and all(getattr(m, "_use_orig_params", False) for m in fsdp1_units):
        with FSDP.summon_full_params(model, recurse=True, writeback=False, with_grads=True):
            for name, parameter in model.named_parameters():
                grads[clean_name(name)] = _copy(parameter.grad)
        return grads
    if fsdp1_units:
        grads.update(_gather_flat_gradients(model))
    for name, parameter in model.named_parameters():
        if getattr(parameter, "_is_flat_param", False):
            continue
        grad = parameter.grad
        if isinstance(parameter, DTensor):
            present = torch.tensor([0 if grad is None else 1], dtype=torch.int64)
            if parameter.device.type != "cpu":
                present = present.to(parameter.device)
            dist.all_reduce(present)
            if int(present.item()) == 0:
                grads[clean_name(name)] = None
                continue
            if grad is None:
                grad = DTensor.from_local(
                    torch.zeros_like(parameter.to_local()), parameter.device_mesh, parameter.placements, run_check=False
                )
            grads[clean_name(name)] = grad.full_tensor().detach().clone()
        else:
            grads[clean_name(name)] = _copy(grad)
    return grads


def _copy(grad: torch.Tensor | None) -> torch.Tensor | None:
    if grad is None:
        return None
    if isinstance(grad, DTensor):
        return grad.full_tensor().detach().clone()
    return grad.detach().clone()


def _gather_flat_gradients(model: torch.nn.Module) -> dict[str, torch.Tensor | None]:
    grads: dict[str, torch.Tensor | None] = {}
    for name, module in model.named_modules():
        handle = getattr(module, "_handle", None) if is_fsdp1_unit(module) else None
        if handle is None:
            continue
        flat = handle.flat_param
        group = handle.process_group
        present = torch.tensor([0 if flat.grad is None else 1], dtype=torch.int64, device=flat.device)
        dist.all_reduce(present, group=group)
        prefix = f"{name}._fsdp_wrapped_module." if name else "_fsdp_wrapped_module."
        names = [clean_name(prefix + fqn) for fqn in flat._fqns]
        if int(present.item()) == 0:
            grads.update({n: None for n in names})
            continue
        local = flat.grad if flat.grad is not None else torch.zeros_like(flat)
        if handle.uses_sharded_strategy:
            padded = torch.empty(flat._padded_unsharded_size, dtype=local.dtype, device=local.device)
            dist.all_gather(list(padded.chunk(dist.get_world_size(group))), local.contiguous(), group=group)
        else:  # NO_SHARD (FSDP1's choice for a world of one): the local gradient is whole
            padded = local
        unpadded = padded[: flat._unpadded_unsharded_size.numel()]
        for parameter_name, view in zip(names, handle._get_unflat_views_unaligned(unpadded)):
            grads[parameter_name] = view.detach().clone()
    return grads
