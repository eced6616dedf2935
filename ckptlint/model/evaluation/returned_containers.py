"""What a checkpointed function or module hands back when it is no tensor or tuple: a dict, a
dataclass, a Hugging Face `ModelOutput`, found through the evaluator
(`ckptlint.model.evaluation.denotation`) across files (CKPT035):

    return {"hidden": h, "pooled": p}            a dict written there (or `dict(...)`, an
                                                 `OrderedDict`, a name bound to one)
    return [h, p]                                a list (a list comprehension, a name bound
                                                 only to lists: `outs = []; outs.append(x)`)
    return x, features                           a tuple holding such a list (the tuple's own
                                                 tensors keep their path, the list's do not)
    return VisionOutput(hidden=h)                a project `@dataclass` or `ModelOutput` subclass,
                                                 a transformers output class
    return self.tower(x)                         what that module returns (a project module's
                                                 forward, a transformers model's `ModelOutput`)
    checkpoint(self.vision_tower, pixels)        a transformers model itself

A transformers model called with `return_dict=False`, or loaded with it, returns a tuple; a
project forward with a `return_dict` parameter called with a false literal is taken to
return its tuple branch; a `return_dict` otherwise unknown is the config's (True), while one
the frame knows (the closure of `create_custom_forward(module, return_dict=False)`) decides
the branches that test it. Anything the evaluator does not know is no container.
"""

from __future__ import annotations

from dataclasses import dataclass

from ckptlint.model.form.summary import ADD, ADD_ELEMENTS, ASSIGN, LIST, Expr, FunctionSummary
from ckptlint.model.form.values import Constant, Frame, FunctionRef, Instance, Mapping
from ckptlint.model.library.transformers import RETURN_DICT, is_model_output_class, is_transformers_model

_MAX_DEPTH = 4


@dataclass(frozen=True)
class ContainerReturn:
    """One container a region returns: what it is, and the path of calls to it."""

    what: str  # "a dict", "the dataclass `VisionOutput`", "a `ModelOutput` (`CLIPVisionModel`)"
    path: tuple[str, ...]  # the functions returning it, outermost first (`Tower.forward`)
    # Inside a returned tuple (`return x, features`): the positions of the containers in it.
    # The tuple's own tensors keep their gradient path, what the loss takes from the
    # containers sends none into the region.
    nested: tuple[int, ...] = ()

    def shown(self) -> str:
        return f"{self.what} (from `{' -> '.join(self.path)}`)" if self.path else self.what


def returned_containers(denotation, run, return_dict: bool | None = None) -> list[ContainerReturn]:
    """The containers calling `run` (a module instance or a function the evaluator found a
    region to run) may return; `return_dict`: the literal the call passes, if any."""
    return _Returns(denotation).of_run(run, return_dict, (), 0)


def call_return_dict(expr: Expr, frame: Frame, denotation) -> bool | None:
    """The truth of the `return_dict=` a summary call passes, when it is known."""
    for name, value in expr[3]:
        if name == RETURN_DICT:
            values = denotation.evaluate(value, frame)
            truths = {bool(v.value) for v in values if isinstance(v, Constant)}
            return truths.pop() if len(truths) == 1 and len(values) == 1 else None
    return None


class _Returns:
    def __init__(self, denotation) -> None:
        self.denotation = denotation
        self.index = denotation.index

    def of_run(self, run, return_dict: bool | None, path: tuple[str, ...], depth: int) -> list[ContainerReturn]:
        if depth > _MAX_DEPTH:
            return []
        if isinstance(run, Instance):
            return self._of_instance(run, return_dict, path, depth)
        if isinstance(run, FunctionRef):
            summary = self.denotation.summary(run.name)
            if summary is None:
                return []
            return self._of_summary(summary, self.denotation.frame_for(run, summary), return_dict, path, depth)
        return []

    def _of_instance(self, instance: Instance, return_dict: bool | None, path, depth) -> list[ContainerReturn]:
        forward = self.denotation.method(instance.cls, "forward")
        if forward is not None:
            frame = Frame(forward.name, self.denotation._module_of(forward.name) or "", (), instance)
            return self._of_summary(forward, frame, return_dict, path, depth)
        model = next((a for a in self.index.ancestors(instance.cls) if is_transformers_model(a)), None)
        if model is None or return_dict is False or _loaded_without_dict(instance):
            return []
        short = model.rsplit(".", 1)[-1]
        shown = instance.short_name if instance.cls == model else f"{instance.short_name}, a `{short}`"
        return [ContainerReturn(f"the `ModelOutput` that `{shown}` returns without `return_dict=False`", path)]

    def _of_summary(self, summary: FunctionSummary, frame: Frame, return_dict, path, depth) -> list[ContainerReturn]:
        if return_dict is False and any(p.name == RETURN_DICT for p in summary.parameters):
            return []  # the tuple branch of an HF-style forward
        here = (*path, _label(summary.name))
        found: list[ContainerReturn] = []
        # `return_dict = return_dict if return_dict is not None else self.config.use_return_dict`:
        # the config's, True unless set otherwise (a call's False is decided above); but a
        # `return_dict` the frame knows as True or False (a closure's, `create_custom_forward(
        # module, return_dict=False)`) decides the branches that test it.
        known = _known_truth(self.denotation.evaluate(("name", RETURN_DICT), frame))
        for returned, conditions in summary.returns:
            if not known:
                conditions = tuple(c for c in conditions if not _mentions(c[0], ("name", RETURN_DICT)))
            if not self.denotation.may_hold(conditions, frame):
                continue
            found.extend(self._of_expression(returned, summary, frame, here, depth))
        return _unique(found)

    def _of_expression(self, expr: Expr, summary: FunctionSummary, frame: Frame, path, depth) -> list[ContainerReturn]:
        if _returns_list(expr, summary):
            return [ContainerReturn("a list", path)]
        if expr[0] == "seq" and len(expr) == 2:
            positions = tuple(i for i, item in enumerate(expr[1]) if _returns_list(item, summary))
            if positions and not any(item[0] == "star" for item in expr[1]):
                return [ContainerReturn("a tuple holding a list", path, nested=positions)]
        if expr[0] == "name":
            bindings = [b for b in summary.bindings if b.pattern == expr]
            if len(bindings) == 1 and bindings[0].how == ASSIGN and bindings[0].value[0] == "call":
                expr = bindings[0].value  # `out = self.tower(x); return out`
        if expr[0] == "call":
            callees = self.denotation.runs(self.denotation.evaluate(expr[1], frame))
            modules = [c for c in callees if isinstance(c, (Instance, FunctionRef))]
            if modules and len(modules) == len(callees):
                return_dict = call_return_dict(expr, frame, self.denotation)
                found = [r for c in modules for r in self.of_run(c, return_dict, path, depth + 1)]
                if found or any(isinstance(c, Instance) for c in modules):
                    return found
        found = []
        for value in self.denotation.evaluate(expr, frame):
            what = self._container(value)
            if what is not None:
                found.append(ContainerReturn(what, path))
        return found

    def _container(self, value) -> str | None:
        if isinstance(value, Mapping):
            entries = [values for _, values in value.entries]
            if entries and all(values and all(isinstance(v, Constant) for v in values) for values in entries):
                return None  # literals only: no tensor in it
            return "a dict"
        if isinstance(value, Instance):
            ancestors = self.index.ancestors(value.cls)
            output = next((a for a in ancestors if is_model_output_class(a)), None)
            if output is not None:
                return f"a Hugging Face `ModelOutput`, `{value.short_name}`"
            facts = self.index.class_named(value.cls)
            if facts is not None and facts.dataclass:
                return f"the dataclass `{value.short_name}`"
        return None


def list_form(expr: Expr) -> bool:
    """A list written out of values that are not all literals: `[h, p]`, `[blk(x) for blk
    in blocks]`."""
    if expr[0] == "seq":
        return len(expr) > 2 and expr[2] == LIST and any(item[0] != "const" for item in expr[1])
    return expr[0] == "comp" and len(expr) > 3 and expr[3] == LIST


def _returns_list(expr: Expr, summary: FunctionSummary) -> bool:
    """A list form (`list_form`), or a name the function binds only to lists (`outs = []`,
    then `outs.append(x)`)."""
    if expr[0] in ("seq", "comp"):
        return list_form(expr)
    if expr[0] != "name":
        return False
    bindings = [b for b in summary.bindings if b.pattern == expr]
    assigned = [b.value for b in bindings if b.how == ASSIGN]
    added = any(b.how in (ADD, ADD_ELEMENTS) for b in bindings)
    # `outs = []` is a list of tensors once something is appended to it.
    return bool(assigned) and all(
        list_form(value) or (added and value[0] == "seq" and len(value) > 2 and value[2] == LIST) for value in assigned
    )


def _known_truth(values) -> bool:
    """Whether the values are all known, and none is None: True or False decided."""
    return bool(values) and all(isinstance(v, Constant) and v.value is not None for v in values)


def _mentions(expr, part) -> bool:
    return expr == part or (isinstance(expr, tuple) and any(_mentions(item, part) for item in expr))


def _loaded_without_dict(instance: Instance) -> bool:
    """`from_pretrained(name, return_dict=False)`: its config returns tuples."""
    values = instance.argument(RETURN_DICT)
    return bool(values) and all(isinstance(v, Constant) and not v.value for v in values)


def _label(name: str) -> str:
    """`pkg.models.Tower.forward` as `Tower.forward`; a module function by its name."""
    parts = name.split(".")
    return ".".join(parts[-2:]) if len(parts) > 2 and parts[-2][:1].isupper() else parts[-1]


def _unique(found: list[ContainerReturn]) -> list[ContainerReturn]:
    seen: dict[tuple[str, tuple[str, ...]], ContainerReturn] = {}
    for item in found:
        seen.setdefault((item.what, item.path), item)
    return list(seen.values())
