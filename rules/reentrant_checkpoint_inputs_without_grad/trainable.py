"""What a module class freezes itself, and whether a checkpointed region holds parameters
that train.

Frozen, in the class's `__init__` (or a method it calls first thing), unconditionally:

    self.embed.requires_grad_(False)                  (also after `.eval()`)
    for p in self.embed.parameters(): p.requires_grad = False   (or `p.requires_grad_(False)`)
    self.embed.weight.requires_grad = False           (an embedding's one parameter; also
                                                      `weight.requires_grad_(False)`)
    self.embed = nn.Embedding.from_pretrained(w)      (`freeze=True` by default)
    self.requires_grad_(False)                        (everything: `ALL`)

unless any method of the class unfreezes the same attribute (or everything) again. What a
training script freezes or unfreezes from outside is the project model's
(`ProjectIndex.frozen_from_outside`); the rule adds it to what the class freezes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from ckptlint.lazy_libcst import cst

from ckptlint.model.form.values import FunctionRef, Instance, Lambda, Sequence, ordering_key
from ckptlint.model.library.torch import MODULE_METHODS_RETURNING_SELF, PARAMETERISED_MODULES

ALL = "*"
WEIGHT_ONLY = "weight"  # `self.embed.weight.requires_grad = False`: the attribute's `weight`
PRETRAINED_EMBEDDING = "from_pretrained"  # `nn.Embedding.from_pretrained(w)`: a frozen embedding
_MAX_DEPTH = 6


def frozen_attributes(
    classdef: cst.ClassDef, is_embedding_from_pretrained: Callable[[cst.Call], bool], line: Callable[[cst.CSTNode], int]
) -> dict[str, tuple[str, int]]:
    """attribute (`ALL` for the whole module) -> how it is frozen ("", `WEIGHT_ONLY`,
    `PRETRAINED_EMBEDDING`) and the line that freezes it."""
    methods = {
        s.name.value: s for s in classdef.body.body if isinstance(s, cst.FunctionDef)
    }
    init = methods.get("__init__")
    if init is None:
        return {}
    frozen: dict[str, tuple[str, int]] = {}
    _freezes(init, methods, frozen, is_embedding_from_pretrained, line, 0)
    return without_unfrozen(frozen, classdef)


def without_unfrozen(frozen: dict[str, tuple[str, int]], classdef: cst.ClassDef) -> dict[str, tuple[str, int]]:
    """`frozen` less what any method of `classdef` (the class, or a subclass) unfreezes."""
    kept = dict(frozen)
    for method in classdef.body.body:
        if isinstance(method, cst.FunctionDef):
            for attribute in _unfrozen(method):
                if attribute == ALL:
                    return {}
                kept.pop(attribute, None)
    return kept


def _freezes(function: cst.FunctionDef, methods, frozen: dict, from_pretrained, line, depth: int) -> None:
    if not isinstance(function.body, cst.IndentedBlock):
        return
    for statement in function.body.body:
        if isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                    call = small.value
                    attribute = _requires_grad_call(call, False)
                    weight = _weight_requires_grad_call(call, False)
                    if attribute is not None:
                        frozen[attribute] = ("", line(statement))
                    elif weight is not None:
                        frozen.setdefault(weight, (WEIGHT_ONLY, line(statement)))
                    elif depth < 2 and not call.args and _self_attribute(call.func) in methods:
                        _freezes(methods[_self_attribute(call.func)], methods, frozen, from_pretrained, line, depth + 1)
                elif isinstance(small, cst.Assign) and len(small.targets) == 1:
                    target = small.targets[0].target
                    attribute = _self_attribute(target)
                    if attribute is not None and isinstance(small.value, cst.Call) and from_pretrained(small.value):
                        frozen[attribute] = (PRETRAINED_EMBEDDING, line(statement))
                    weight = _weight_requires_grad(target, small.value, False)
                    if weight is not None:
                        frozen.setdefault(weight, (WEIGHT_ONLY, line(statement)))
        elif isinstance(statement, cst.For):
            attribute = _parameters_loop(statement)
            if attribute is not None and _loop_sets(statement, False):
                frozen[attribute] = ("", line(statement))


def _unfrozen(function: cst.FunctionDef) -> Iterator[str]:
    """The attributes (or `ALL`) any statement of the method makes trainable again."""
    found: list[str] = []

    class Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            attribute = _requires_grad_call(node, True) or _weight_requires_grad_call(node, True)
            if attribute is not None:
                found.append(attribute)

        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                weight = _weight_requires_grad(target.target, node.value, True)
                if weight is not None:
                    found.append(weight)

        def visit_For(self, node: cst.For) -> None:
            attribute = _parameters_loop(node)
            if attribute is not None and _loop_sets(node, True):
                found.append(attribute)
            elif _loop_sets(node, True):
                found.append(ALL)  # `for p in params: p.requires_grad = True`: which, not known

    function.visit(Visitor())
    yield from found


def _self_attribute(expr: cst.BaseExpression) -> str | None:
    """`A` of `self.A` (also of `self.A.eval()`, `self.A.to(device)`); `ALL` for `self`."""
    while (
        isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in MODULE_METHODS_RETURNING_SELF
    ):
        expr = expr.func.value
    if isinstance(expr, cst.Name) and expr.value == "self":
        return ALL
    if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
        return expr.attr.value
    return None


def _flag(args, default: bool) -> bool | None:
    """The `requires_grad` a `requires_grad_(...)` call passes (True when omitted)."""
    if not args:
        return default
    value = args[0].value
    if isinstance(value, cst.Name) and value.value in ("True", "False"):
        return value.value == "True"
    return None


def _requires_grad_receiver(call: cst.Call, wanted: bool) -> cst.BaseExpression | None:
    """What `X.requires_grad_(wanted)` is called on: X."""
    func = call.func
    if not (isinstance(func, cst.Attribute) and func.attr.value == "requires_grad_"):
        return None
    flag = _flag(call.args, True)
    if flag is not wanted and not (wanted and flag is None):
        return None
    return func.value


def _requires_grad_call(call: cst.Call, wanted: bool) -> str | None:
    """`self.A.requires_grad_(wanted)`: A (or `ALL`)."""
    receiver = _requires_grad_receiver(call, wanted)
    return None if receiver is None else _self_attribute(receiver)


def _weight_requires_grad_call(call: cst.Call, wanted: bool) -> str | None:
    """`self.A.weight.requires_grad_(wanted)`: A."""
    owner = _requires_grad_receiver(call, wanted)
    if isinstance(owner, cst.Attribute) and owner.attr.value == "weight":
        attribute = _self_attribute(owner.value)
        return attribute if attribute != ALL else None
    return None


def _weight_requires_grad(target, value, wanted: bool) -> str | None:
    """`self.A.weight.requires_grad = wanted`: A."""
    if not (isinstance(target, cst.Attribute) and target.attr.value == "requires_grad"):
        return None
    if not (isinstance(value, cst.Name) and value.value == ("True" if wanted else "False")) and not (wanted and not isinstance(value, cst.Name)):
        return None
    owner = target.value
    if isinstance(owner, cst.Attribute) and owner.attr.value == "weight":
        return _self_attribute(owner.value)
    return None


def _parameters_loop(loop: cst.For) -> str | None:
    """`for p in self.A.parameters():` (or `named_parameters()`): A (or `ALL`)."""
    it = loop.iter
    if isinstance(it, cst.Call) and isinstance(it.func, cst.Attribute) and it.func.attr.value in ("parameters", "named_parameters"):
        return _self_attribute(it.func.value)
    return None


def _loop_sets(loop: cst.For, wanted: bool) -> bool:
    """Whether the loop's body sets `<p>.requires_grad = wanted` or calls `<p>.requires_grad_(wanted)`."""
    found = []

    class Visitor(cst.CSTVisitor):
        def visit_Assign(self, node: cst.Assign) -> None:
            for target in node.targets:
                if isinstance(target.target, cst.Attribute) and target.target.attr.value == "requires_grad":
                    value = node.value
                    literal = value.value == "True" if isinstance(value, cst.Name) and value.value in ("True", "False") else None
                    found.append(literal is wanted or (wanted and literal is None))

        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Attribute) and node.func.attr.value == "requires_grad_":
                flag = _flag(node.args, True)
                found.append(flag is wanted or (wanted and flag is None))

    loop.body.visit(Visitor())
    return any(found)


# --- the region's parameters ----------------------------------------------------------------


class TrainableParameters:
    """Paths to the parameterised modules a region runs (`stem -> (torch.nn.Conv2d)`), less
    those below an attribute of the site's class that class freezes."""

    def __init__(self, project, frozen: dict[str, tuple[str, int]], owner: str | None = None) -> None:
        self.project = project
        self.denotation = project.denotation
        # Wholly frozen attributes (an embedding's `weight` alone counts as the embedding).
        self.frozen = {attribute: "" for attribute, (how, _) in frozen.items() if how != WEIGHT_ONLY}
        # The modules those attributes of an `owner` hold (and their containers' members):
        # a region running one of them (`for block in self.blocks: checkpoint(block, x)`) is frozen.
        self.frozen_modules: set = set()
        if owner is not None and self.frozen and ALL not in self.frozen:
            instance = self.denotation.instance(owner)
            for attribute in sorted(self.frozen):
                for value in self.denotation.attribute(instance, attribute):
                    self._add_frozen(value, 0)

    def _add_frozen(self, value, depth: int) -> None:
        if isinstance(value, Instance) and depth <= _MAX_DEPTH and value not in self.frozen_modules:
            self.frozen_modules.add(value)
            for members in value.members or ():
                for member in members:
                    self._add_frozen(member, depth + 1)

    def of(self, runs: frozenset, first: str | None, label: str | None = None) -> list[str]:
        """`first`: the attribute of the site's class the checkpointed callable is (`self.blocks`);
        `label`: how the site names it."""
        if ALL in self.frozen or (first is not None and self.frozen.get(first) == ""):
            return []
        found: list[str] = []
        for value in sorted(runs, key=ordering_key):
            found.extend(self._value(value, label or first, 0))
        return list(dict.fromkeys(found))

    def _value(self, value, label: str | None, depth: int) -> Iterator[str]:
        if depth > _MAX_DEPTH or value in self.frozen_modules:
            return
        if isinstance(value, Instance):
            yield from self._instance(value, label, depth)
        elif isinstance(value, FunctionRef):
            yield from self._function(value, depth)
        elif isinstance(value, Lambda):
            for expr in value.calls:
                attribute = _own_attribute(expr)
                if attribute is not None and self.frozen.get(attribute) == "":
                    continue
                for callee in sorted(self.denotation.evaluate(expr, value.frame), key=ordering_key):
                    yield from self._value(callee, attribute, depth + 1)
        elif isinstance(value, Sequence):
            for element in sorted(value.elements, key=ordering_key):
                yield from self._value(element, label, depth + 1)

    def _instance(self, instance: Instance, label: str | None, depth: int) -> Iterator[str]:
        shown = f"{label} -> " if label else ""
        lineage = self.project.ancestors(instance.cls)
        if any(name.startswith("torch.nn.") and name.rsplit(".", 1)[-1] in PARAMETERISED_MODULES for name in lineage):
            yield f"{shown}({instance.cls})"
            return
        if instance.members is not None:
            for members in instance.members:
                for member in sorted(members, key=ordering_key):
                    yield from self._value(member, label, depth + 1)
            return
        if self.project.class_named(instance.cls) is None:
            return
        for attribute, children in sorted(self.denotation.children(instance).items()):
            for child in sorted(children, key=ordering_key):
                yield from self._value(child, f"{instance.short_name}.{attribute}", depth + 1)

    def _function(self, function: FunctionRef, depth: int) -> Iterator[str]:
        summary = self.denotation.summary(function.name)
        if summary is None:
            return
        owner = function.frame.self_instance if function.frame is not None else None
        frame = self.denotation.frame_for(function, summary)
        for callee, line in summary.calls:
            attribute = _own_attribute(callee, summary.self_name) if owner is not None else None
            if attribute is not None and self.frozen.get(attribute) == "" and depth == 0:
                continue
            for value in sorted(self.denotation.evaluate(callee, replace(frame, before=line + 1)), key=ordering_key):
                yield from self._value(value, attribute, depth + 1)


def _own_attribute(expr: tuple, self_name: str | None = "self") -> str | None:
    """`A` of the summary expression `self.A` (or `self.A[i]`)."""
    while expr[0] == "index":
        expr = expr[1]
    if expr[0] == "attr" and expr[1] == ("name", self_name):
        return expr[2]
    return None
