"""What each checkpoint call of the baseline run looked like, and what changed before backward.

With checkpointing off, every `checkpoint(...)` call still passes through the patched
internals (see `_switch`), which hand it to `RegionRecorder`. Right after the region's
function returns, the recorder fingerprints what a recomputation would read again: the
cells of the function's closure, its non-tensor arguments, and the plain attributes of the
module it belongs to. After the forward (and loss), before backward, it looks again: a
closure cell bound to another object is a late-binding closure (CKPT030); a container,
flag or tensor-in-a-container that changed is state mutated across recompute (CKPT031).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch

from ckptlint.runtime_check._hazards import LATE_BINDING_CLOSURE, STATE_CHANGED_BEFORE_BACKWARD
from ckptlint.runtime_check._state import describe_value, plain_fingerprint, render_plain, state_attributes


@dataclass(frozen=True)
class Cause:
    """A reason a recomputation saw something the forward did not."""

    code: str
    subject: str
    message: str


@dataclass
class RegionCall:
    implementation: str  # "reentrant" | "non-reentrant"
    preserve_rng_state: bool
    inputs_require_grad: bool
    description: str
    module: str | None  # the qualified name of the module the region runs, when it runs one
    function: Callable[..., Any]
    arguments: tuple[Any, ...]
    keywords: dict[str, Any]
    watched: dict[tuple[str, str], Any] = field(default_factory=dict)
    site: str = ""  # file:line of the checkpoint call, in the user's (or the model library's) code
    input_storages: frozenset[int] = frozenset()  # what checkpoint keeps anyway: not a saving
    depth: int = 0  # module forwards running when the region began
    # Whether the function checkpointed is a Hugging Face (transformers, PEFT) layer's: how
    # transformers' gradient checkpointing passes it (`partial(layer.__call__, **kwargs)`).
    from_hugging_face: bool = False
    ran: list[str] = field(default_factory=list)  # the outermost modules its function ran, by name
    ran_modules: list[torch.nn.Module] = field(default_factory=list)  # and the modules (until released)


class RegionRecorder:
    """Collects the checkpoint calls of one step; `names` maps id(module) to its qualified name."""

    def __init__(self, names: dict[int, str], watch: bool = True) -> None:
        self.names = names
        self.watch = watch
        self.calls: list[RegionCall] = []
        self.active: list[int] = []  # indices of the calls whose function is running, innermost last
        self._depth = 0  # module forwards running now (while the recorder watches modules)
        self._module_hooks: list[Any] = []

    @contextlib.contextmanager
    def watching_modules(self) -> Iterator[None]:
        """While in force, each region learns which modules its function runs (outermost
        first): a closure (timm's `checkpoint_seq`, a project's closure factory, torch's
        reentrant `CheckpointWrapper` with keywords) is named by the modules it runs."""
        if not self.watch:
            yield
            return

        def before(module: torch.nn.Module, args: Any) -> None:
            if self.active:
                call = self.calls[self.active[-1]]
                name = self.names.get(id(module))
                if self._depth == call.depth and name is not None:
                    call.ran.append(clean_name(name) or "(model)")
                    call.ran_modules.append(module)
            self._depth += 1

        def after(module: torch.nn.Module, args: Any, output: Any) -> None:
            self._depth -= 1

        hooks = torch.nn.modules.module
        self._module_hooks = [hooks.register_module_forward_pre_hook(before), hooks.register_module_forward_hook(after, always_call=True)]
        try:
            with warnings.catch_warnings():
                # torch.compile(model) warns that global hooks fire once more for its wrapper:
                # these count only modules the model names, which the wrapper is not.
                warnings.filterwarnings("ignore", message=r"Using `torch\.compile\(module\)` when there are global hooks")
                yield
        finally:
            self._stop_watching_modules()

    def _stop_watching_modules(self) -> None:
        for handle in self._module_hooks:
            handle.remove()
        self._module_hooks = []

    def record(self, implementation: str, function: Callable[..., Any], preserve_rng_state: bool, args: tuple, kwargs: dict) -> RegionCall:
        call = RegionCall(
            implementation=implementation,
            preserve_rng_state=bool(preserve_rng_state),
            inputs_require_grad=any(isinstance(a, torch.Tensor) and a.requires_grad for a in args),
            description=describe_callable(function, self.names) if self.watch else "",
            module=self._owner_name(function, args) if self.watch else None,
            function=function if self.watch else None,  # type: ignore[arg-type]
            arguments=tuple(args) if self.watch else (),
            keywords=dict(kwargs) if self.watch else {},
            site=call_site() if self.watch else "",
            input_storages=frozenset(_storages(args)) if self.watch else frozenset(),
            depth=self._depth,
            from_hugging_face=_from_hugging_face(function),
        )
        self.calls.append(call)
        self.active.append(len(self.calls) - 1)
        return call

    def running(self) -> tuple[int, frozenset[int]] | None:
        """The innermost region running now (its index and input storages), if any."""
        if not self.active:
            return None
        index = self.active[-1]
        return index, self.calls[index].input_storages

    def _owner_name(self, function: Any, args: tuple[Any, ...] = ()) -> str | None:
        owner = _owning_module(function)
        if owner is None and args and isinstance(args[0], torch.nn.Module) and getattr(function, "__name__", "") == "forward":
            owner = args[0]  # checkpoint(Block.forward, block, x): the region is that block
        if owner is None:
            return None
        name = self.names.get(id(owner))
        return (clean_name(name) or "(model)") if name is not None else None

    def after_call(self, call: RegionCall) -> None:
        if self.active:
            self.active.pop()
        if self.watch:
            call.watched = self._watch(call)
            if call.module is None and call.ran:
                call.module = modules_named(call.ran)
                call.description = f"{call.description}, running {call.module}"

    def release(self) -> None:
        """Drop the references to the step's tensors (before backward, so that the baseline's
        memory is not held longer than the step itself holds it). The step's forward is over:
        modules are no longer watched (a script's later steps are timed without the hooks)."""
        self._stop_watching_modules()
        for call in self.calls:
            call.function = None  # type: ignore[assignment]
            call.ran_modules = []
            call.arguments = ()
            call.keywords = {}
            call.watched = {}

    def causes(self) -> list[Cause]:
        """What changed, since each region ran, that its recomputation reads. Call before backward."""
        found: dict[tuple[str, str], Cause] = {}
        for call in self.calls:
            now = self._watch(call)
            for key, before in call.watched.items():
                after = now.get(key)
                if after == before:
                    continue
                kind, name = key
                if kind == "cell":
                    found.setdefault(
                        (kind, name),
                        Cause(
                            LATE_BINDING_CLOSURE,
                            name,
                            f"the checkpointed function {call.description} captures `{name}`, which was "
                            f"{before[1]} when the region ran and is {after[1] if after else 'gone'} at backward: "
                            "the recomputation runs with the new value (a closure over a loop variable; "
                            "bind it as a default argument or use functools.partial)",
                        ),
                    )
                else:
                    found.setdefault(
                        (kind, name),
                        Cause(
                            STATE_CHANGED_BEFORE_BACKWARD,
                            name,
                            f"{name}, read by the checkpointed function {call.description}, changed after the "
                            f"region ran and before backward ({_render_fingerprint(before)} -> "
                            f"{_render_fingerprint(after)}): the recomputation sees the new value",
                        ),
                    )
        # model.eval() flips every submodule: name the outermost module only.
        suffix = ".training`"
        flipped = {key[1][1 : -len(suffix)] for key in found if key[1].endswith(suffix)}

        def inside_another(path: str) -> bool:
            return any(outer != path and (outer == "(model)" or path.startswith(outer + ".")) for outer in flipped)

        return [
            cause
            for key, cause in found.items()
            if not (key[1].endswith(suffix) and inside_another(key[1][1 : -len(suffix)]))
        ]

    def _watch(self, call: RegionCall) -> dict[tuple[str, str], Any]:
        watched: dict[tuple[str, str], Any] = {}
        function = call.function
        if function is None:
            return watched
        for name, value in _closure_cells(function):
            watched[("cell", name)] = (id(value), describe_value(value, self.names))
            contents = _contents_fingerprint(value)
            if contents is not None:
                watched[("cell contents", f"the contents of `{name}`")] = contents
        bound = list(call.arguments) + list(_partial_arguments(function))
        for index, value in enumerate(bound):
            contents = _contents_fingerprint(value)
            if contents is not None:
                watched[("argument", f"argument {index} ({type(value).__name__})")] = contents
        for key, value in [*call.keywords.items(), *_partial_keywords(function).items()]:
            contents = _contents_fingerprint(value)
            if contents is not None:
                watched[("argument", f"keyword argument `{key}`")] = contents
        owner = _owning_module(function)
        if owner is not None:
            prefix = self.names.get(id(owner), "")
            for suffix, module in owner.named_modules():
                qualified = ".".join(p for p in (prefix, suffix) if p) or "(model)"
                # model.eval()/.train() between forward and backward changes what dropout and
                # BatchNorm do in the recomputation.
                watched[("attribute", f"`{qualified}.training`")] = ("value", module.training)
                for attribute, value in state_attributes(module):
                    fingerprint = plain_fingerprint(value)
                    if fingerprint is not None:
                        watched[("attribute", f"`{qualified}.{attribute}`")] = fingerprint
        return watched


# Wrappers that hold the module they wrap under one attribute: FSDP1, torch's
# checkpoint_wrapper, torch.compile. A region or parameter is named as the model names it.
WRAPPER_ATTRIBUTES = ("_fsdp_wrapped_module", "_checkpoint_wrapped_module", "_orig_mod")


def clean_name(name: str) -> str:
    """`_fsdp_wrapped_module.blocks.0._checkpoint_wrapped_module.fc1.weight` -> `blocks.0.fc1.weight`."""
    return ".".join(part for part in name.split(".") if part and part not in WRAPPER_ATTRIBUTES)


def modules_named(names: list[str]) -> str:
    """Modules in one phrase: `stages.2`; `blocks.0-3` or `stages.0-5.bn` when they differ
    only in one index and the indices run consecutively; else the first three and a count."""
    unique = list(dict.fromkeys(names))
    if len(unique) == 1:
        return unique[0]
    split = [name.split(".") for name in unique]
    if len({len(parts) for parts in split}) == 1:
        varying = [i for i in range(len(split[0])) if len({parts[i] for parts in split}) > 1]
        if len(varying) == 1 and all(parts[varying[0]].isdigit() for parts in split):
            position = varying[0]
            numbers = [int(parts[position]) for parts in split]
            if numbers == list(range(numbers[0], numbers[0] + len(numbers))):
                parts = list(split[0])
                parts[position] = f"{numbers[0]}-{numbers[-1]}"
                return ".".join(parts)
    shown = ", ".join(unique[:3])
    return shown if len(unique) <= 3 else f"{shown} and {len(unique) - 3} more"


_NOT_A_SITE = tuple(
    os.path.dirname(path) + os.sep
    for path in (torch.__file__, __file__, contextlib.__file__, functools.__file__)
)


def call_site() -> str:
    """Where checkpoint was called: the innermost frame outside torch, ckptlint and the
    standard library (a model library's file, such as transformers', counts)."""
    frame = sys._getframe(1)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith("<") and not filename.startswith(_NOT_A_SITE):
            try:
                shown = os.path.relpath(filename)
            except ValueError:
                shown = filename
            marker = os.sep + "site-packages" + os.sep
            if marker in filename:
                shown = filename.split(marker, 1)[1]  # transformers/modeling_layers.py
            elif shown.startswith(".." + os.sep + ".."):
                shown = os.sep.join(filename.split(os.sep)[-2:])
            return f"{shown}:{frame.f_lineno}"
        frame = frame.f_back
    return "?"


def _storages(args: tuple[Any, ...]) -> list[int]:
    found = []
    for value in args:
        if isinstance(value, torch.Tensor):
            try:
                found.append(value.untyped_storage().data_ptr())
            except (RuntimeError, NotImplementedError):
                continue
    return found


def describe_callable(function: Any, names: dict[int, str]) -> str:
    if isinstance(function, functools.partial):
        return f"functools.partial({describe_callable(function.func, names)})"
    if isinstance(function, torch.nn.Module):
        return f"module '{names.get(id(function), '?')}' ({type(function).__name__})"
    if inspect.ismethod(function):
        owner = function.__self__
        if isinstance(owner, torch.nn.Module):
            return f"{type(owner).__name__}.{function.__name__} of '{names.get(id(owner), '?') or '(model)'}'"
        return f"{type(owner).__name__}.{function.__name__}"
    code = getattr(function, "__code__", None)
    if code is not None:
        filename = code.co_filename
        try:
            filename = os.path.relpath(filename)
        except ValueError:
            pass
        return f"{getattr(function, '__qualname__', function.__name__)} ({filename}:{code.co_firstlineno})"
    return type(function).__name__


def _closure_cells(function: Any) -> list[tuple[str, Any]]:
    while isinstance(function, functools.partial):
        function = function.func
    code = getattr(function, "__code__", None)
    closure = getattr(function, "__closure__", None)
    if code is None or not closure:
        return []
    cells = []
    for name, cell in zip(code.co_freevars, closure):
        try:
            cells.append((name, cell.cell_contents))
        except ValueError:  # an empty cell (not yet assigned)
            continue
    return cells


def _partial_arguments(function: Any) -> tuple[Any, ...]:
    found: tuple[Any, ...] = ()
    while isinstance(function, functools.partial):
        found += tuple(function.args)
        function = function.func
    return found


def _partial_keywords(function: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    while isinstance(function, functools.partial):
        found.update(function.keywords)
        function = function.func
    return found


def _owning_module(function: Any) -> torch.nn.Module | None:
    while isinstance(function, functools.partial):
        function = function.func
    if isinstance(function, torch.nn.Module):
        return function
    owner = getattr(function, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


def _leaf(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), value._version if not value.is_inference() else 0)
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return value
    return ("object", id(value))


def _contents_fingerprint(value: Any) -> Any:
    """One level into a mutable container: None for anything else."""
    if isinstance(value, dict):
        return ("dict", tuple((repr(k), _leaf(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", tuple(_leaf(v) for v in value))
    if isinstance(value, set):
        return ("set", len(value))
    return None


def _render_fingerprint(fingerprint: Any) -> str:
    if fingerprint is None:
        return "gone"
    kind = fingerprint[0] if isinstance(fingerprint, tuple) and fingerprint else None
    if kind == "dict":
        return "{" + ", ".join(f"{k}: {_render_leaf(v)}" for k, v in fingerprint[1]) + "}"
    if kind == "list":
        return "[" + ", ".join(_render_leaf(v) for v in fingerprint[1]) + "]"
    if kind == "set":
        return f"a set of {fingerprint[1]}"
    return render_plain(fingerprint)


def _render_leaf(leaf: Any) -> str:
    if isinstance(leaf, tuple) and leaf and leaf[0] == "tensor":
        return f"tensor (version {leaf[2]})"
    if isinstance(leaf, tuple) and leaf and leaf[0] == "object":
        return "object"
    return repr(leaf)


_HUGGING_FACE_PACKAGES = ("transformers", "peft")


def _from_hugging_face(function: object) -> bool:
    """Whether `function` (unwrapped from `functools.partial`s) is a method of an object, or
    a function, defined in transformers or PEFT."""
    for _ in range(8):
        inner = getattr(function, "func", None)
        if inner is None:
            break
        function = inner
    owner = getattr(function, "__self__", None)
    module = type(owner).__module__ if owner is not None else getattr(function, "__module__", None)
    return isinstance(module, str) and module.split(".", 1)[0] in _HUGGING_FACE_PACKAGES
