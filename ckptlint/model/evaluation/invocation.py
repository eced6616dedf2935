"""What calling a value does, for the evaluator (`ckptlint.model.evaluation.denotation`): a class is
constructed with the arguments matched to its `__init__` (torch's containers hold their
members; a library class keeps its constant arguments), a project function returns what
its summary returns under the call's arguments, a registry's `get` / `build` reads the
registered class, a project object's `__call__` runs. A mixin of `Denotation`, which provides `_eval`, `summary`, `index`,
`_method`, `_module_of`, `_may_hold` and the other mixins' methods."""

from __future__ import annotations

from ckptlint.model.library.combined import is_container_class
from ckptlint.model.library.python import ORDERED_DICTS
from ckptlint.model.library.openmmlab import conv_module_config_keys, is_mmcv
from ckptlint.model.library.timm import is_norm_act_factory
from ckptlint.model.library.transformers import is_model_loader
from ckptlint.model.form.summary import Expr, FunctionSummary
from ckptlint.model.form.values import (
    NOTHING,
    Arguments,
    ClassRef,
    Constant,
    Frame,
    FunctionRef,
    Instance,
    Mapping,
    Sequence,
    Splat,
    Value,
    arguments_of,
)


class CallSemantics:
    def _call(self, expr: Expr, frame: Frame) -> set:
        func = expr[1]
        positional, named, opaque = self._arguments(expr, frame)
        if func[0] == "attr" and func[2] in ("get", "build") and positional and not isinstance(positional[0], Splat):
            registry = self._registry(func[1], frame)
            if registry is not None:  # `BACKBONES.get("resnet")`, `MODELS.build(dict(type="ResNet", depth=50))`
                return self._from_registry(registry, func[2], positional[0], named)
        if func == ("name", "super") and not expr[2] and frame.self_instance is not None and frame.function:
            return self._super_view(frame)
        if func[0] == "attr" and self._global_dotted(func, frame) is None:
            receivers = self._eval(func[1], frame)
            return self._method_call(receivers, func[2], positional, named, opaque)
        found: set = set()
        for callee in self._eval(func, frame):
            found |= self._invoke(callee, positional, named, opaque)
        return found

    def _arguments(self, expr: Expr, frame: Frame) -> tuple[list, dict[str, frozenset], bool]:
        """What a call passes: by position (a `Splat` for a `*` whose items are not known),
        by name, and whether a `**` splat's keys are not known."""
        _, _, args, keywords = expr
        positional: list[frozenset | Splat] = []
        for arg in args:
            if arg[0] == "star":
                values = self._eval(arg[1], frame)
                items = self._sequence_items(values)
                positional.extend(items) if items else positional.append(Splat(values))
            else:
                positional.append(self._eval(arg, frame))
        named: dict[str, frozenset] = {}
        opaque = False  # a `**` splat whose keys are not known
        for name, value in keywords:
            values = self._eval(value, frame)
            if name is not None:
                named[name] = values
                continue
            mappings = [v for v in values if isinstance(v, Mapping)]
            opaque = opaque or not mappings or len(mappings) != len(values)
            for mapping in mappings:
                for key, entry in mapping.entries:
                    if isinstance(key, str):
                        named[key] = named.get(key, NOTHING) | entry
        return positional, named, opaque

    def _invoke(self, callee: Value, positional: list, named: dict, opaque: bool) -> set:
        if isinstance(callee, ClassRef) and callee.name in ORDERED_DICTS:
            # `OrderedDict([(name, module), ...])`, `OrderedDict()`: a mapping, as `dict(...)`
            return self._library_function(FunctionRef("builtins.dict"), positional, named)
        if isinstance(callee, ClassRef):
            return {self._construct(callee, positional, named, opaque)}
        if isinstance(callee, FunctionRef):
            if is_model_loader(callee.name):
                # `CLIPVisionModel.from_pretrained(name, return_dict=False)`: a model of that
                # class, with the constant arguments it was loaded with
                return {self._construct(ClassRef(callee.name.rpartition(".")[0]), positional, named, opaque)}
            library = is_mmcv(callee.name, "build_norm_layer") or is_norm_act_factory(callee.name)
            summary = self.summary(callee.name) if not library else None
            if summary is not None:  # (a copy of mmcv or timm in the project's tree is mmcv, timm: library facts)
                positional = [*callee.positional, *positional]
                named = {**dict(callee.bound), **named}
                return self._returns(summary, callee, positional, named, opaque)
            return self._library_function(callee, positional, named)
        if isinstance(callee, Instance):
            # `Builder(norm_layer)(channels, arch)`: a project object called runs its
            # `__call__` (a module's runs `forward`, which returns tensors: nothing followed).
            summary = self._method(callee.cls, "__call__")
            if summary is not None:
                frame = Frame(summary.name, "", (), callee)
                return self._returns(summary, FunctionRef(summary.name, frame), positional, named, opaque)
        return set()

    def _construct(self, cls: ClassRef, positional: list, named: dict, opaque: bool) -> Instance:
        named = {**dict(cls.bound), **named}
        facts = self.index.class_named(cls.name)
        if facts is None:
            if is_container_class(cls.name):
                members = self._container_members(positional, {k: v for k, v in named.items() if k != "init_cfg"})
                keys = self._container_keys(positional, named, members)
                return Instance(cls.name, (), members, not any(isinstance(v, Splat) for v in positional), keys=keys)
            constants = [
                (f"#{i}", v) for i, v in enumerate(positional)
                if not isinstance(v, Splat) and v and all(isinstance(c, Constant) for c in v)
            ]
            constants += [(k, v) for k, v in named.items() if v and all(isinstance(c, Constant) for c in v)]
            # mmcv's `ConvModule(..., norm_cfg=dict(type="BN"))`: the dicts that decide what it holds
            constants += [
                (k, named[k]) for k in conv_module_config_keys(cls.name)
                if named.get(k) and not all(isinstance(c, Constant) for c in named[k])
            ]
            return Instance(cls.name, arguments_of(constants))
        init = self._method(facts.name, "__init__")
        if init is None:  # a dataclass's generated constructor: the fields it is given
            given = [(f"#{i}", v if not isinstance(v, Splat) else NOTHING) for i, v in enumerate(positional)]
            return Instance(facts.name, arguments_of([*given, *named.items()]))
        return Instance(facts.name, self._match(init, positional, named, opaque, skip_self=True))

    def _returns(self, summary: FunctionSummary, callee: FunctionRef, positional: list, named: dict, opaque: bool) -> set:
        bound = callee.frame.self_instance is not None if callee.frame is not None else False
        arguments = self._match(summary, positional, named, opaque, skip_self=bound or summary.self_name is not None)
        frame = Frame(
            summary.name,
            self._module_of(summary.name) or "",
            arguments,
            callee.frame.self_instance if callee.frame is not None else None,
            callee.frame if callee.frame is not None and callee.frame.function != summary.name else None,
        )
        found: set = set()
        for returned, conditions in summary.returns:
            if self._may_hold(conditions, frame):
                found |= self._eval(returned, frame)
        return found

    def _match(self, summary: FunctionSummary, positional: list, named: dict, opaque: bool, *, skip_self: bool) -> Arguments:
        """The arguments of a call by parameter name. After a `*` splat positions are not
        known: the parameters from there on are unknown (an empty set)."""
        parameters = list(summary.parameters)
        # (a classmethod's `cls`, by convention, is given by Python too)
        if skip_self and parameters and parameters[0].kind == "positional" and parameters[0].name in (summary.self_name, "cls"):
            parameters = parameters[1:]
        slots = [p for p in parameters if p.kind == "positional"]
        found: dict[str, frozenset] = {}
        extra: list[frozenset] = []
        unknown_from = None
        for position, values in enumerate(positional):
            if isinstance(values, Splat):
                unknown_from = position
                break
            if position < len(slots):
                found[slots[position].name] = values
            else:
                extra.append(values)
        if unknown_from is not None:
            for slot in slots[unknown_from:]:
                found.setdefault(slot.name, NOTHING)
        for name, values in named.items():
            if any(p.name == name and p.kind != "*" for p in parameters):
                found[name] = values
        star = next((p for p in parameters if p.kind == "*"), None)
        if star is not None and extra:
            found[star.name] = frozenset({Sequence(tuple(extra), frozenset().union(*extra))})
        double_star = next((p for p in parameters if p.kind == "**"), None)
        if double_star is not None:
            rest = [(k, v) for k, v in named.items() if not any(p.name == k for p in parameters)]
            if not opaque:
                found[double_star.name] = frozenset({Mapping(tuple(rest))})
        return arguments_of(found.items())
