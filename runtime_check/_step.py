"""One training step, as the verifier replays it: forward, loss, backward."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

import torch

from ckptlint.runtime_check._types import VerifyError


@dataclass(frozen=True)
class StepInputs:
    args: tuple[Any, ...]
    kwargs: dict[str, Any]

    @classmethod
    def from_inputs(cls, inputs: Any) -> "StepInputs":
        """A tensor is the one positional argument, a tuple the positional arguments, a
        mapping the keyword arguments; anything else is the one positional argument."""
        if isinstance(inputs, tuple):
            return cls(tuple(inputs), {})
        if isinstance(inputs, Mapping):
            return cls((), dict(inputs))
        return cls((inputs,), {})

    def detached(self) -> "StepInputs":
        """Inputs produced by an autograd graph outside the step become leaves, so the
        replayed backward stays inside the step."""
        return StepInputs(_map_tensors(self.args, _as_leaf), {k: _map_tensors(v, _as_leaf) for k, v in self.kwargs.items()})

    def tensors(self) -> list[torch.Tensor]:
        found: list[torch.Tensor] = []
        _collect_tensors((self.args, self.kwargs), found)
        return found

    def named_leaves(self) -> list[tuple[str, torch.Tensor]]:
        """Input tensors that receive a gradient, named as the user wrote them."""
        named: list[tuple[str, torch.Tensor]] = []
        for index, value in enumerate(self.args):
            _name_tensors(value, f"input[{index}]", named)
        for key, value in self.kwargs.items():
            _name_tensors(value, f"input[{key!r}]", named)
        return [(name, t) for name, t in named if t.requires_grad and t.is_leaf]


def _as_leaf(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.grad_fn is None:
        return tensor
    return tensor.detach().requires_grad_(tensor.requires_grad)


def _map_tensors(value: Any, function: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(value, torch.Tensor):
        return function(value)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_map_tensors(v, function) for v in value)
    if isinstance(value, list):
        return [_map_tensors(v, function) for v in value]
    if type(value) is dict:
        return {k: _map_tensors(v, function) for k, v in value.items()}
    return value


def _collect_tensors(value: Any, found: list[torch.Tensor]) -> None:
    if isinstance(value, torch.Tensor):
        found.append(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            _collect_tensors(item, found)
    elif isinstance(value, Mapping):
        for item in value.values():
            _collect_tensors(item, found)


def _name_tensors(value: Any, name: str, found: list[tuple[str, torch.Tensor]]) -> None:
    if isinstance(value, torch.Tensor):
        found.append((name, value))
    elif isinstance(value, (tuple, list)):
        for index, item in enumerate(value):
            _name_tensors(item, f"{name}[{index}]", found)
    elif isinstance(value, Mapping):
        for key, item in value.items():
            _name_tensors(item, f"{name}[{key!r}]", found)


def _output_loss(output: Any) -> torch.Tensor | None:
    loss = output.get("loss") if isinstance(output, Mapping) else getattr(output, "loss", None)
    if isinstance(loss, torch.Tensor) and loss.numel() == 1:
        return loss
    return None


def _floating_outputs(output: Any) -> list[torch.Tensor]:
    found: list[torch.Tensor] = []
    _collect_tensors(output, found)
    return [t for t in found if t.is_floating_point() and t.requires_grad]


class StepLoss:
    """The user's `loss_fn`; else `output.loss`; else a fixed random projection of every
    floating output that requires grad (the same projection in every run)."""

    SEED = 20240611

    def __init__(self, loss_fn: Callable[[Any], torch.Tensor] | None) -> None:
        self.loss_fn = loss_fn
        self.source = "loss_fn" if loss_fn is not None else "output.loss"
        self._projections: dict[tuple, torch.Tensor] = {}

    def __call__(self, output: Any) -> torch.Tensor:
        if self.loss_fn is not None:
            loss = self.loss_fn(output)
        else:
            loss = _output_loss(output)
            if loss is None:
                loss = self._project(output)
        if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
            raise VerifyError(f"the loss ({self.source}) is not a scalar tensor: got {_describe(loss)}")
        if not loss.requires_grad:
            raise VerifyError(f"the loss ({self.source}) does not require grad: nothing in the step is trained")
        return loss.reshape(())

    def _project(self, output: Any) -> torch.Tensor:
        tensors = _floating_outputs(output)
        if not tensors:
            raise VerifyError(
                "the model's output has no `loss` and no floating tensor that requires grad; "
                "give a loss_fn (make_case() may return one)"
            )
        self.source = f"fixed random projection of {len(tensors)} floating output(s)"
        total = None
        for index, tensor in enumerate(tensors):
            key = (index, tuple(tensor.shape), tensor.dtype, tensor.device)
            projection = self._projections.get(key)
            if projection is None:
                generator = torch.Generator().manual_seed(self.SEED + index)
                projection = torch.randn(tuple(tensor.shape), generator=generator, dtype=torch.float64)
                projection = (projection / math.sqrt(max(tensor.numel(), 1))).to(device=tensor.device, dtype=tensor.dtype)
                self._projections[key] = projection
            term = (tensor * projection).sum()
            total = term if total is None else total + term
        return total


def _describe(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {list(value.shape)}"
    return type(value).__name__


def run_step(
    model: torch.nn.Module,
    inputs: StepInputs,
    loss: StepLoss,
    *,
    on_backward: Callable[[], None] | None = None,
    backward_context: contextlib.AbstractContextManager[Any] | None = None,
    autocast: tuple[tuple[str, torch.dtype], ...] = (),
) -> torch.Tensor:
    """Forward, loss, backward; returns the loss (detached). `on_backward` runs between
    the forward and the backward; `autocast` (device type, dtype) pairs wrap the forward and
    the loss, as a training script under `torch.autocast` runs them."""
    with torch.enable_grad():
        with contextlib.ExitStack() as stack:
            for device_type, dtype in autocast:
                stack.enter_context(torch.autocast(device_type, dtype=dtype))
            output = model(*inputs.args, **inputs.kwargs)
            value = loss(output)
        if on_backward is not None:
            on_backward()
        with backward_context or contextlib.nullcontext():
            value.backward()
    return value.detach()
