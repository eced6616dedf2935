"""What a module instance holds: its class's methods (nearest project base first), the
values an attribute is assigned in any method (or its class body), `add_module` /
`register_module` / `setattr` registrations and children under computed names; what a
method called on a value denotes (`children()`, a ModuleDict's `items()`, a dict's `get`, a
classmethod factory); the classes below a BatchNorm-freezing module. A mixin of
`ckptlint.model.evaluation.denotation.Denotation`.
"""

from __future__ import annotations

import itertools

from collections import Counter
from dataclasses import replace

from ckptlint.model.library import open_clip
from ckptlint.model.library.combined import BATCHNORM_FREEZING_CONVERTERS
from ckptlint.model.library.python import STRING_METHODS
from ckptlint.model.library.torch import CHILDREN_METHODS, MODULE_METHODS_RETURNING_SELF
from ckptlint.model.library.transformers import MODEL_LOADERS, is_transformers_model
from ckptlint.model.syntax.names import is_test_path
from ckptlint.model.file_facts.norm_freezing import UNKNOWN_FLAG
from ckptlint.model.library.torchvision import torchvision_model
from ckptlint.model.form.summary import ADD, ASSIGN, ELEMENTS, MODULE_LEVEL, Binding, FunctionSummary
from ckptlint.model.form.values import (
    NOTHING,
    ClassRef,
    Constant,
    Frame,
    FunctionRef,
    Instance,
    Mapping,
    ModuleRef,
    OutOfBudget,
    Sequence,
    Splat,
    SuperView,
    Value,
    falsy,
    flatten_modules,
    ordering_key,
)

_MAX_BELOW = 500  # module instances walked below one BatchNorm-freezing module
_INSTANCES_PER_CLASS = 4
_CLASS_BODY = ".<class>"  # the summary of a class body (`ckptlint.model.file_facts.extraction`)


class ModuleSemantics:
    def method(self, class_name: str, method: str) -> FunctionSummary | None:
        """The summary of a method of a class or of its nearest project base."""
        return self._method(class_name, method)

    def _method(self, class_name: str, method: str) -> FunctionSummary | None:
        for ancestor in self.index.ancestors(class_name):
            summary = self.summary(f"{ancestor}.{method}")
            if summary is not None:
                return summary
        return None

    def _class_methods(self, class_name: str) -> list[FunctionSummary]:
        """Every summarised method of a class and its project bases (nearest first)."""
        found = self._methods_cache.get(class_name)
        if found is None:
            found = []
            for ancestor in self.index.ancestors(class_name):
                module = self._module_of(ancestor)
                if module is None:
                    continue
                prefix = f"{ancestor}."
                found.extend(
                    summary
                    for name, summary in self._module_summaries(module).items()
                    if name.startswith(prefix) and "." not in name[len(prefix):]
                )
            self._methods_cache[class_name] = found
        return found

    def flag_off_everywhere(self, class_name: str, attribute: str) -> bool:
        """Whether `self.<attribute>` is off in every instance of a project class: its own
        constructor stores a parameter whose default is False (or None) there (`self.with_cp
        = with_cp`), nothing assigns it a value that may be true, and the project builds the
        class only with that parameter left out or given a False / None literal, turning it
        off explicitly at least once outside its tests (`SpatialPrior(64, with_cp=False)`):
        a class only ever built with its defaults keeps the flag as a switch for whoever
        builds it (a library's users). Not known (False) for a class with project
        subclasses, one registered or held as a value (a table, a builder's argument: built
        where the model cannot see, from a config), or a call passing a variable, a
        parameter of its own caller or a splat."""
        init = self.summary(f"{class_name}.__init__")
        if init is None or init.self_name is None or self.index.class_named(class_name) is None:
            return False
        stored = {
            b.value[1] for b in init.bindings
            if b.pattern == ("attr", ("name", init.self_name), attribute) and b.value[0] == "name"
        }
        parameters = [p for p in init.parameters if p.kind not in ("*", "**")]
        flags = [(i, p) for i, p in enumerate(parameters) if p.name in stored and p.name != init.self_name]
        if len(flags) != 1 or flags[0][1].default not in (("const", False), ("const", None)):
            return False
        values = self.attribute(self.instance(class_name), attribute)
        if not values or not all(falsy(v) for v in values):
            return False
        if any(class_name in self.index.ancestors(other)[1:] for other in self.index.classes):
            return False
        if any(cls == class_name for facts in self.index.files.values() for _, _, cls in facts.registrations):
            return False
        module = self._module_of(init.name)
        if module is None or self.call_sites.named_as_value(init.name, module):
            return False
        position = flags[0][0] - (1 if parameters and parameters[0].name == init.self_name else 0)
        said = False  # a construction of the project's own passing the flag off explicitly
        try:
            calls = [
                (path, call) for path, caller, call, line in self.call_sites.of(init.name, module)
                if self._calls_function(call[1], init, replace(self._entry_frame(caller.name), before=line + 1))
            ]
        except OutOfBudget:
            return False
        for path, call in calls:
            _, _, args, keywords = call
            if any(arg[0] == "star" for arg in args) or any(name is None for name, _ in keywords):
                return False
            passed = [value for name, value in keywords if name == flags[0][1].name]
            passed += [args[position]] if position < len(args) else []
            if any(value not in (("const", False), ("const", None)) for value in passed):
                return False
            said = said or (bool(passed) and not is_test_path(path))
        return said

    def batchnorm_frozen_classes(self) -> frozenset[str]:
        """The project classes whose instances sit below a module whose `train()` puts every
        BatchNorm in eval mode (`norm_eval`), its flags holding with the values the project
        gives them (a flag some constructor call of the project, not of its tests, sets to
        False does not hold); a flag whose value is not known may hold. Subclasses inherit
        the override."""
        key = ("batchnorm_frozen_classes",)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        found: set[str] = set()
        freezing = {c.name: c for c in self.index.batchnorm_freezers}
        # Subclasses inherit the override (mmdet's ResNeSt / Res2Net / HRNet-style ResNets).
        classes = [
            (name, freezer) for name in (self.index.class_names() if freezing else ())
            for freezer in [next((freezing[a] for a in self.index.ancestors(name) if a in freezing), None)]
            if freezer is not None
        ]
        for name, freezer in classes:
            instance = self.instance(name)
            init = self._method(name, "__init__")
            parameters = {p.name for p in init.parameters} if init is not None else set()
            flags = [
                self.attribute(instance, flag) | (self.passed_by_the_project(init, flag) if flag in parameters else frozenset())
                for flag in freezer.batchnorm_frozen_under if flag != UNKNOWN_FLAG
            ]
            if any(any(falsy(v) for v in values) for values in flags):
                continue  # a flag the project may leave off
            found |= self._classes_below(instance)
        # What the project hands to a `freeze_bn(model)` helper (detectron / mmdet style).
        for function, parameter in self.index.batchnorm_freezing_functions:
            summary = self.summary(function)
            module = self._module_of(function)
            if summary is None or module is None:
                continue
            try:
                for _, caller, call, line in self.call_sites.of(function, module):
                    frame = replace(self._entry_frame(caller.name), before=line + 1)
                    for value in self._argument_at(summary, parameter, call, frame):
                        if isinstance(value, Instance) and self.index.class_named(value.cls) is not None:
                            found |= self._classes_below(value)
            except OutOfBudget:
                pass
        # What the project runs such a function on with `Module.apply` (`model.apply(set_bn_eval)`),
        # and hands to a library converter (`FrozenBatchNorm2d.convert_frozen_batchnorm(model)`).
        sites = [
            (call, line, caller, call[1][1])
            for function in self.index.batchnorm_freezers_applied if (module := self._module_of(function)) is not None
            for _, caller, call, line in self.call_sites.applications(function, module)
        ] + [
            (call, line, caller, call[2][0])
            for converter in sorted(BATCHNORM_FREEZING_CONVERTERS)
            for _, caller, call, line in self.call_sites.library_calls(converter)
            if call[2] and call[2][0][0] != "star"
        ]
        for call, line, caller, frozen in sites:
            try:
                frame = replace(self._entry_frame(caller.name), before=line + 1)
                for value in self._eval(frozen, frame):
                    if isinstance(value, Instance) and self.index.class_named(value.cls) is not None:
                        found |= self._classes_below(value)
            except OutOfBudget:
                pass
        result = frozenset(found)
        self._memo[key] = result
        return result

    def _classes_below(self, instance: Instance) -> set[str]:
        """The project classes of `instance` and of the modules below it."""
        found: set[str] = set()
        pending, seen, expanded = [instance], set(), Counter()
        while pending and len(seen) < _MAX_BELOW:
            current = pending.pop()
            # Instances of one class differ by their arguments (widths, strides): a few of
            # each say what the class holds.
            if current in seen or expanded[current.cls] >= _INSTANCES_PER_CLASS:
                continue
            seen.add(current)
            expanded[current.cls] += 1
            if self.index.class_named(current.cls) is not None:
                found.add(current.cls)
            pending.extend(child for children in self.children(current).values() for child in children)
        return found

    def _super_view(self, frame: Frame) -> set:
        """`super()` in the method `frame` runs, when that method is one of the instance's
        classes' (not a function nested in it)."""
        defined_in = frame.function.rsplit(".", 1)[0]
        if defined_in not in self.index.ancestors(frame.self_instance.cls):
            return set()
        return {SuperView(frame.self_instance, defined_in)}

    def _super_method(self, view: SuperView, name: str) -> FunctionSummary | None:
        """The method `super().<name>` finds: in the nearest ancestor after the class the
        `super()` call is written in."""
        for ancestor in self.index.ancestors_after(view.instance.cls, view.defined_in):
            summary = self.summary(f"{ancestor}.{name}")
            if summary is not None:
                return summary
        return None

    def _attribute_of(self, value: Value, name: str | None) -> set:
        if isinstance(value, ModuleRef):
            if name == "__dict__":  # `models.__dict__[args.arch]`
                return {Mapping(tuple((key, frozenset(self._absolute(member))) for key, member in self._module_members(value.name)))}
            if name is None:  # `getattr(trainers, config.trainer)`: any of its classes and functions
                return set().union(*(self._absolute(member) for _, member in self._module_members(value.name)))
            return set(self._absolute(f"{value.name}.{name}"))
        if isinstance(value, SuperView) and name is not None:
            method = self._super_method(value, name)
            if method is None or method.is_property:
                return set()
            return {FunctionRef(method.name, Frame(method.name, self._module_of(method.name) or "", (), value.instance))}
        if isinstance(value, Instance) and value.keys is not None and name is not None:
            return set(self._member_named(value, name))  # `self.transformer.h` of a ModuleDict
        if isinstance(value, Instance) and name is not None and self.index.class_named(value.cls) is None:
            held = open_clip.attribute_values(value, name)  # `clip.transformer.resblocks`
            if held is not None:
                return held
        if isinstance(value, Instance) and name is not None and torchvision_model(value.cls) is not None:
            return {Instance(f"{value.cls}.<child>.{name}")}  # `resnet.layer1`: `library.torchvision_holds`
        if isinstance(value, Instance) and value.members is None and self.index.class_named(value.cls) is not None:
            if name is None:  # `getattr(self, name)`: any of its children
                return {v for values in self._children(value).values() for v in values}
            return set(self._attribute(value, name))
        if isinstance(value, ClassRef) and name is not None and self.index.class_named(value.name) is not None:
            return self._class_attribute(value.name, name)
        return set()

    def _module_members(self, module: str) -> list[tuple[str, str]]:
        """The public classes and functions a project module defines (a package's
        `__init__` also those it imports from the project), by name: what a name chosen at
        run time can fetch from it. Not its variables, nor library names it imports."""
        return sorted(self._namespace(module, 0).items())

    def _namespace(self, module: str, depth: int) -> dict[str, str]:
        """`_module_members` by name, those of its star imports (`from .resnet import *`) too."""
        path = self.index.module_paths.get(module) or ""
        package = path.endswith("__init__.py")
        members: dict[str, str] = {}
        for star in self.star_imports(module) if depth < 4 else ():
            members.update(self._namespace(star, depth + 1))
        for name, absolute in self._names(module).items():
            if name.startswith("_") or (absolute != f"{module}.{name}" and not package):
                continue
            if self.index.class_named(absolute) is not None or (
                self.summary(absolute) is not None and not absolute.endswith(f".{MODULE_LEVEL}")
            ):
                members[name] = absolute
        return members

    def _class_attribute(self, class_name: str, name: str) -> set:
        """`Config.norm` (also `cfg.norm` for a parameter annotated `cfg: Config`): the value
        the nearest class body binds, a dataclass field's default among them."""
        for summary in self._class_methods(class_name):
            if not summary.name.endswith(_CLASS_BODY):
                continue
            bindings = [b for b in summary.bindings if b.pattern == ("name", name)]
            if bindings:
                frame = Frame(summary.name, self._module_of(summary.name) or "", (), None)
                return set().union(*(self._binding_values(binding, frame) for binding in bindings))
        return set()

    def _attribute(self, instance: Instance, name: str) -> frozenset:
        key = ("attribute", instance, name)
        cached = self._memo.get(key)
        if cached is not None:
            return cached
        if key in self._active:
            return NOTHING
        self._active.add(key)
        try:
            found: set = set()
            registered = False
            for summary in self._class_methods(instance.cls):
                constructor = summary.name.endswith(".__init__")
                arguments = instance.arguments if constructor else ()
                if constructor and summary.name != f"{instance.cls}.__init__":
                    # A base's constructor runs with what the subclass's passes it
                    # (`super().__init__(depths, norm_eval=True)`), when that is known.
                    arguments = self._super_arguments(instance, summary) or ()
                frame = Frame(
                    summary.name, self._module_of(summary.name) or "", arguments, instance,
                    entry=instance.generic and summary.name == f"{instance.cls}.__init__",
                )
                own = ("attr", ("name", summary.self_name), name)
                if summary.name.endswith(_CLASS_BODY):
                    own = ("name", name)  # a class attribute (`arch_settings = {...}`)
                    passed = _field_argument(instance, name)
                    if passed is not None and any(binding.pattern == own for binding in summary.bindings):
                        # A dataclass field given to the generated constructor (`Config(norm="bn")`)
                        registered = True
                        found |= passed
                        continue
                for binding in summary.bindings:
                    target = binding.pattern
                    if target == own or target == ("child", name):
                        registered = True
                        found |= self._binding_values(binding, frame)
                    elif target[0] == "seq" and own in target[1] and binding.how == ASSIGN:
                        # `self.bn1, self.bn2 = self._norms(cfg)`: the item at its position
                        registered = True
                        position = target[1].index(own)
                        for value in self._binding_values(binding, frame):
                            if isinstance(value, Sequence) and value.items is not None and len(value.items) == len(target[1]):
                                found |= value.items[position]
                            else:
                                found |= self._elements((value,))
            if not registered:
                method = self._method(instance.cls, name)
                if method is None:
                    found |= self._dynamic_children(instance)
                else:  # a bound method; a property (`self.norm1`) is what it returns
                    bound = FunctionRef(method.name, Frame(method.name, self._module_of(method.name) or "", (), instance))
                    found |= self._returns(method, bound, [], {}, False) if method.is_property else {bound}
        finally:
            self._active.discard(key)
        result = frozenset(found)
        self._memo[key] = result
        return result

    def _super_arguments(self, instance: Instance, base_init: FunctionSummary):
        """The arguments `super().__init__(...)` in the instance's own constructor passes to
        `base_init` (its direct base's constructor), evaluated with the instance's own
        arguments; None when the constructor passes none or calls another base."""
        own_init = self._method(instance.cls, "__init__")
        if own_init is None or own_init.name == base_init.name or own_init.name != f"{instance.cls}.__init__":
            return None
        facts = self.index.class_named(instance.cls)
        base = self.index.class_named(facts.bases[0]) if facts is not None and len(facts.bases) == 1 else None
        if base is None or base_init.name != f"{base.name}.__init__":
            return None  # several bases, or the constructor is a farther ancestor's
        for call, line in own_init.passes:
            if call[1][0] == "attr" and call[1][2] == "__init__" and call[1][1][:2] == ("call", ("name", "super")):
                frame = Frame(own_init.name, self._module_of(own_init.name) or "", instance.arguments, instance,
                              before=line + 1, entry=instance.generic)
                positional, named, opaque = self._arguments(call, frame)
                # What it passes and the model knows; the rest (`**kwargs` handed on, a
                # value not known) keeps the base's defaults.
                matched = self._match(base_init, positional, named, opaque, skip_self=True)
                return tuple((name, values) for name, values in matched if values)
        return None

    def _binding_values(self, binding: Binding, frame: Frame) -> set:
        frame = replace(frame, before=binding.line)
        if not self._may_hold(binding.conditions, frame):
            return set()
        values = self._eval(binding.value, frame)
        if binding.how == ASSIGN:
            return set(values)
        if binding.how == ELEMENTS:
            return set(self._elements(values))
        added = values if binding.how == ADD else frozenset(self._elements(values))
        return {Sequence(None, frozenset(added))}

    def _dynamic_children(self, instance: Instance) -> frozenset:
        """Children registered under names computed at run time (`add_module(f"layer{i}", m)`)."""
        found: set = set()
        for summary in self._class_methods(instance.cls):
            arguments = instance.arguments if summary.name.endswith(".__init__") else ()
            frame = Frame(summary.name, self._module_of(summary.name) or "", arguments, instance)
            for binding in summary.bindings:
                if binding.pattern == ("child", None):
                    found |= self._binding_values(binding, frame)
        return frozenset(flatten_modules(found, self._elements))

    def _children(self, instance: Instance) -> dict[str, frozenset]:
        if instance.members is not None:
            return {str(i): members for i, members in enumerate(instance.members)}
        if self.index.class_named(instance.cls) is None:
            return {}
        names: list[str] = []
        for summary in self._class_methods(instance.cls):
            for binding in summary.bindings:
                target = binding.pattern
                if target[0] == "attr" and target[1] == ("name", summary.self_name):
                    names.append(target[2])
                elif target[0] == "seq":
                    names.extend(t[2] for t in target[1] if t[0] == "attr" and t[1] == ("name", summary.self_name))
                elif target[0] == "child" and target[1] is not None:
                    names.append(target[1])
        found: dict[str, frozenset] = {}
        for name in dict.fromkeys(names):
            modules = frozenset(flatten_modules(self._attribute(instance, name), self._elements))
            if modules:
                found[name] = modules
        dynamic = self._dynamic_children(instance)
        if dynamic:
            found["*"] = dynamic
        return found

    def _method_call(self, receivers: frozenset, method: str, positional: list, named: dict, opaque: bool) -> set:
        found: set = set()
        for receiver in receivers:
            if isinstance(receiver, SuperView):  # `super().forward(x)`: the base's method
                summary = self._super_method(receiver, method)
                if summary is not None:
                    found |= self._returns(
                        summary, FunctionRef(summary.name, Frame(summary.name, "", (), receiver.instance)), positional, named, opaque
                    )
                continue
            library = torchvision_model(receiver.cls) if isinstance(receiver, Instance) else None
            if library is not None and method in ("children", "named_children"):
                # `list(resnet.children())[:-2]`: the library model's children, in order
                items = [frozenset({Instance(f"{receiver.cls}.<child>.{name}")}) for name in library[2]]
                if method == "named_children":
                    items = [frozenset({Sequence((frozenset({Constant(n)}), item), item)}) for n, item in zip(library[2], items)]
                found.add(Sequence(tuple(items), frozenset().union(*items)))
                continue
            if isinstance(receiver, Instance):
                if method in CHILDREN_METHODS:
                    children = [v for values in self._children(receiver).values() for v in values]
                    if method.startswith("named"):
                        found.add(Sequence(None, frozenset(Sequence((NOTHING, frozenset({c})), frozenset({c})) for c in children)))
                    else:
                        found.add(Sequence(None, frozenset(children)))
                    continue
                if receiver.members is not None and method in ("values", "children", "modules"):
                    found.add(Sequence(None, frozenset().union(*receiver.members) if receiver.members else NOTHING))
                    continue
                if receiver.members is not None and method in ("items", "named_children"):
                    # `for name, block in self.blocks.items()` over a ModuleDict
                    found.add(Sequence(None, frozenset(Sequence((NOTHING, member), member) for member in receiver.members)))
                    continue
                summary = self._method(receiver.cls, method)
                if summary is not None:
                    found |= self._returns(summary, FunctionRef(summary.name, Frame(summary.name, "", (), receiver)),
                                           positional, named, opaque)
                elif method in MODULE_METHODS_RETURNING_SELF:
                    found.add(receiver)  # `Student().train()`, `Net().to(device)`
                elif self.index.class_named(receiver.cls) is not None:
                    # A class or function the object holds, called: `self.norm_layer(dim)`,
                    # `layers.conv_norm_act(...)` (a dataclass field, timm's `LayerFn`)
                    for value in self._attribute(receiver, method):
                        if isinstance(value, (ClassRef, FunctionRef)):
                            found |= self._invoke(value, positional, named, opaque)
            elif isinstance(receiver, Mapping):
                if method == "values":
                    found.add(Sequence(None, frozenset().union(*(v for _, v in receiver.entries)) if receiver.entries else NOTHING))
                elif method == "items":
                    found.add(Sequence(None, frozenset(
                        Sequence((frozenset({Constant(k)}), v), frozenset({Constant(k)}) | v) for k, v in receiver.entries
                    )))
                elif method in ("get", "pop") and positional and not isinstance(positional[0], Splat):
                    # `cfg.get("type")`, `cfg_.pop("type")` (mmcv's `build_norm_layer`)
                    keys = {c.value for c in positional[0] if isinstance(c, Constant)}
                    hits = [v for k, v in receiver.entries if not keys or k in keys]
                    if hits:
                        found |= frozenset().union(*hits)
                    elif len(positional) > 1 and not isinstance(positional[1], Splat):
                        found |= positional[1]
            elif isinstance(receiver, Constant) and isinstance(receiver.value, str) and method in STRING_METHODS:
                # `norm_layer.replace("_", "").lower()` before a table lookup (timm's
                # `get_norm_layer("LayerNorm")`): the key itself, not every entry.
                arguments = [p for p in positional if not isinstance(p, Splat)]
                if named or opaque or len(arguments) != len(positional):
                    continue
                for values in itertools.product(*(sorted(a, key=ordering_key) for a in arguments)):
                    if not all(isinstance(v, Constant) and isinstance(v.value, str) for v in values):
                        continue
                    result = getattr(receiver.value, method)(*(v.value for v in values))
                    if isinstance(result, list):  # `split`: the parts, in order
                        items = tuple(frozenset({Constant(part)}) for part in result)
                        found.add(Sequence(items, frozenset().union(*items)))
                    else:
                        found.add(Constant(result))
            elif isinstance(receiver, Sequence) and method in ("values", "children", "modules"):
                # members added to a `ModuleDict()` / `Sequential()` by key or `add_module`
                found.add(Sequence(None, frozenset(self._elements((receiver,)))))
            elif isinstance(receiver, Sequence) and method in ("items", "named_children"):
                elements = frozenset(self._elements((receiver,)))
                found.add(Sequence(None, frozenset({Sequence((NOTHING, elements), elements)})))
            elif isinstance(receiver, (Sequence, Mapping)) and method == "copy":
                found.add(receiver)
            elif isinstance(receiver, ClassRef) and self.index.class_named(receiver.name) is not None:
                summary = self._method(receiver.name, method)
                if summary is not None:  # a classmethod / staticmethod factory
                    found |= self._returns(summary, FunctionRef(summary.name), positional, named, opaque)
            elif isinstance(receiver, ClassRef) and method in MODEL_LOADERS and is_transformers_model(receiver.name):
                # `CLIPVisionModel.from_pretrained(name, return_dict=False)`: a model of that
                # class, with the constant arguments it was loaded with
                found.add(self._construct(receiver, positional, named, opaque))
        return found




def _field_argument(instance: Instance, name: str) -> frozenset | None:
    """What the constructor call of a class without a constructor of its own (a dataclass)
    passed for field `name`: the keyword's values; nothing known when arguments were passed by
    position (the fields' order is not kept); None when nothing was passed for it."""
    arguments = dict(instance.arguments)
    if name in arguments:
        return arguments[name]
    if any(key.startswith("#") for key in arguments):
        return NOTHING
    return None
