"""Snapshot and restore of everything a training step can change.

Parameters and buffers (values, and which tensor object a module holds), gradients, the
plain Python attributes of every module (containers restored in place, so other references
to them stay valid), train/eval flags, and the RNG states (torch CPU and CUDA, `random`,
NumPy). Each replayed step starts from the snapshot; afterwards the model is handed back as
it came, gradients included.
"""

from __future__ import annotations

import collections
import random
import sys
from dataclasses import dataclass
from typing import Any, Iterator

import torch

MODULE_INTERNALS = frozenset(vars(torch.nn.Module())) | {"_compiled_call_impl"}
def _compile_wrapper_attributes() -> frozenset[str]:
    """What torch.compile's wrappers keep about themselves, as torch lists it
    (`OptimizedModule._opt_mod_attributes`, torch._functorch's `_DYNAMO_WRAPPER_ATTRS`): the
    wrapper's own id, its dynamo context, the original forward. Read only when dynamo is
    loaded: before that no module is compiled."""
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    wrapper = getattr(getattr(eval_frame, "OptimizedModule", None), "_opt_mod_attributes", ())
    functorch = getattr(sys.modules.get("torch._functorch.apis"), "_DYNAMO_WRAPPER_ATTRS", ())
    return frozenset(wrapper) | frozenset(functorch)


def is_run_identity(module: Any, attribute: str, value: Any, wrapper_attributes: frozenset[str] | None = None) -> bool:
    """An attribute that identifies this run's objects rather than holding state: torch's
    own internals, dynamo's wrapper attributes (never equal between two runs of a script),
    and an int that is the module's own `id()`."""
    if wrapper_attributes is None:
        wrapper_attributes = _compile_wrapper_attributes()
    if attribute in MODULE_INTERNALS or attribute.startswith("_torchdynamo") or attribute in wrapper_attributes:
        return True
    return type(value) is int and value == id(module)


def state_attributes(module: torch.nn.Module) -> Iterator[tuple[str, Any]]:
    """A module's plain Python attributes that are its state (what a forward may change)."""
    wrapper_attributes = _compile_wrapper_attributes()
    for attribute, value in vars(module).items():
        if not is_run_identity(module, attribute, value, wrapper_attributes):
            yield attribute, value


_SCALARS = (bool, int, float, complex, str, bytes)
_CONTAINERS = (list, tuple, dict, set, frozenset, collections.deque)


def plain_fingerprint(value: Any) -> tuple | None:
    """A comparable summary of a plain attribute value, or None for anything else.

    Numbers and strings by value, containers by length (what a counter, a log list or a
    cache dict reveals when a forward ran twice), tensors held as plain attributes by shape.
    """
    if value is None or isinstance(value, _SCALARS):
        if isinstance(value, float) and value != value:
            return ("value", "nan")
        return ("value", value)
    if isinstance(value, _CONTAINERS):
        return ("len", type(value).__name__, len(value))
    if isinstance(value, torch.Tensor) and not isinstance(value, torch.nn.Parameter):
        return ("tensor", tuple(value.shape), str(value.dtype).replace("torch.", ""))
    return None


def render_plain(fingerprint: tuple | None) -> str:
    if fingerprint is None:
        return "absent"
    kind = fingerprint[0]
    if kind == "value":
        return _short(repr(fingerprint[1]))
    if kind == "len":
        return f"{fingerprint[1]} of length {fingerprint[2]}"
    if kind == "tensor":
        return f"tensor of shape {list(fingerprint[1])} ({fingerprint[2]})"
    return _short(repr(fingerprint))


def describe_value(value: Any, names: dict[int, str]) -> str:
    if isinstance(value, torch.nn.Module):
        name = names.get(id(value))
        return f"module '{name or '(model)'}' ({type(value).__name__})" if name is not None else f"a {type(value).__name__} module"
    if value is None or isinstance(value, _SCALARS):
        return _short(repr(value))
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    return f"a {type(value).__name__}"


def attribute_fingerprints(modules: list[tuple[str, torch.nn.Module]]) -> dict[tuple[str, str], tuple]:
    found = {}
    for name, module in modules:
        for attribute, value in state_attributes(module):
            fingerprint = plain_fingerprint(value)
            if fingerprint is not None:
                found[(name, attribute)] = fingerprint
    return found


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


class RngState:
    """torch CPU, CUDA (when initialised), `random` and NumPy (when imported) generators."""

    def __init__(self) -> None:
        self.cpu = torch.get_rng_state()
        self.cuda = torch.cuda.get_rng_state_all() if _cuda_initialized() else None
        self.python = random.getstate()
        numpy = sys.modules.get("numpy")
        self.numpy = numpy.random.get_state() if numpy is not None else None

    def restore(self) -> None:
        torch.set_rng_state(self.cpu)
        if self.cuda is not None:
            torch.cuda.set_rng_state_all(self.cuda)
        random.setstate(self.python)
        if self.numpy is not None:
            sys.modules["numpy"].random.set_state(self.numpy)

    @staticmethod
    def torch_states() -> dict[str, torch.Tensor]:
        """The torch generators' states now, by name ("cpu", "cuda:0", ...)."""
        states = {"cpu": torch.get_rng_state()}
        if _cuda_initialized():
            for index, state in enumerate(torch.cuda.get_rng_state_all()):
                states[f"cuda:{index}"] = state
        return states


def _cuda_initialized() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_initialized()


@dataclass
class _Slot:
    """A tensor a module holds under `name` in `_parameters` or `_buffers`."""

    module: torch.nn.Module
    table: str
    name: str
    tensor: torch.Tensor


class ModelSnapshot:
    """The state of a model (and of the step's input tensors) at one moment."""

    def __init__(self, model: torch.nn.Module, input_tensors: list[torch.Tensor]) -> None:
        self.modules = list(model.named_modules())
        self.slots: list[_Slot] = []
        for _, module in self.modules:
            for table in ("_parameters", "_buffers"):
                for name, tensor in getattr(module, table).items():
                    if tensor is not None:
                        self.slots.append(_Slot(module, table, name, tensor))
        # Each distinct tensor once: its value, its version counter, its gradient.
        self.tensors: dict[int, torch.Tensor] = {}
        for tensor in [slot.tensor for slot in self.slots] + input_tensors:
            self.tensors.setdefault(id(tensor), tensor)
        with torch.no_grad():
            self.values = {key: tensor.detach().clone() for key, tensor in self.tensors.items()}
        self.grads = {key: tensor.grad for key, tensor in self.tensors.items() if tensor.requires_grad}
        self.training = [(module, module.training) for _, module in self.modules]
        self.attributes = [(module, self._plain_attributes(module)) for _, module in self.modules]
        self.rng = RngState()

    @staticmethod
    def _plain_attributes(module: torch.nn.Module) -> tuple[dict[str, Any], dict[str, Any]]:
        references = {k: v for k, v in vars(module).items() if k not in MODULE_INTERNALS}
        contents = {}
        for key, value in references.items():
            if isinstance(value, (list, collections.deque)):
                contents[key] = list(value)
            elif isinstance(value, (dict, set)):
                contents[key] = value.copy()
        return references, contents

    def storage_pointers(self) -> set[int]:
        """Storages of parameters and buffers: what the saved-tensor meter leaves out."""
        pointers = set()
        for slot in self.slots:
            try:
                pointers.add(slot.tensor.untyped_storage().data_ptr())
            except (RuntimeError, NotImplementedError):
                continue
        return pointers

    def tracked_tensors(self) -> Iterator[torch.Tensor]:
        return iter(self.tensors.values())

    def prepare_run(self) -> None:
        """Back to the snapshot, with every gradient cleared, ready for one step."""
        self._restore_model()
        for tensor in self.tensors.values():
            if tensor.requires_grad or tensor.grad is not None:
                tensor.grad = None
        self.rng.restore()

    def restore(self) -> None:
        """Back to the snapshot, original gradient tensors included."""
        self._restore_model()
        for key, tensor in self.tensors.items():
            if key in self.grads:
                tensor.grad = self.grads[key]
            elif tensor.grad is not None:
                tensor.grad = None
        self.rng.restore()

    def _restore_model(self) -> None:
        for slot in self.slots:
            getattr(slot.module, slot.table)[slot.name] = slot.tensor
        # Always copied: kernels such as batch_norm update running stats in place without
        # bumping the version counter, so versions cannot tell what changed.
        with torch.no_grad():
            for key, tensor in self.tensors.items():
                if not tensor.is_inference():  # read-only outside inference mode
                    tensor.copy_(self.values[key])
        for module, training in self.training:
            module.training = training
        for module, (references, contents) in self.attributes:
            state = vars(module)
            for key in [k for k in state if k not in MODULE_INTERNALS and k not in references]:
                del state[key]
            for key, value in references.items():
                state[key] = value
                if key in contents:
                    saved = contents[key]
                    if isinstance(value, list):
                        value[:] = saved
                    elif isinstance(value, collections.deque):
                        value.clear()
                        value.extend(saved)
                    else:
                        value.clear()
                        value.update(saved)
