"""The evaluator's semantics of Python's containers and of the library calls it interprets:
`list` / `dict` / `zip` / `enumerate` / `chain` / `getattr`, `functools.partial`, indexing
and literal slices, comprehensions, torch's `Sequential` / `ModuleList` / `ModuleDict`
members, `timm.create_model` (a library model named by its architecture) and mmcv's
`build_norm_layer` (`ckptlint.model.library.openmmlab`). A mixin of
`ckptlint.model.evaluation.denotation.Denotation`: it evaluates through the evaluator's `_eval`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from ckptlint.model.library import open_clip
from ckptlint.model.library.combined import is_container_class
from ckptlint.model.library.torch import STATE_UPDATING_WRAPPERS
from ckptlint.model.library.timm import TIMM_CREATE_MODEL
from ckptlint.model.library.timm import is_norm_act_factory, norm_act_layers
from ckptlint.model.library.torchvision import torchvision_model
from ckptlint.model.library.openmmlab import is_mmcv, norm_layer_name, norm_layers
from ckptlint.model.form.summary import Expr
from ckptlint.model.form.values import (
    ANY_KEY,
    NOTHING,
    ClassRef,
    Constant,
    Frame,
    FunctionRef,
    Instance,
    Lambda,
    Mapping,
    ModuleRef,
    Sequence,
    Splat,
    StoredItem,
    Value,
    arguments_of,
    destructure,
    flatten_modules,
    names_in,
)

_COPIES = frozenset({"copy.copy", "copy.deepcopy"})


def _pair(item: frozenset):
    """(key, values) of a `(literal name, value)` tuple among a list's items, else None."""
    pairs = [v for v in item if isinstance(v, Sequence) and v.items is not None and len(v.items) == 2]
    if len(pairs) != 1 or len(item) != 1:
        return None
    keys = [k for k in pairs[0].items[0] if isinstance(k, Constant)]
    if len(keys) != 1 or len(pairs[0].items[0]) != 1:
        return None
    return keys[0].value, pairs[0].items[1]


class ContainerSemantics:
    def _library_function(self, callee: FunctionRef, positional: list, named: dict) -> set:
        name = callee.name
        short = name.rsplit(".", 1)[-1]
        known = [v for v in positional if not isinstance(v, Splat)]
        if name in TIMM_CREATE_MODEL:
            # A library model: named by the architecture it is created from, when that is known.
            first = positional[0] if positional and not isinstance(positional[0], Splat) else NOTHING
            names = first | named.get("model_name", NOTHING)
            constants = frozenset(v for v in names if isinstance(v, Constant) and isinstance(v.value, str))
            return {Instance(name, arguments_of([("model_name", constants)]))} if constants and len(constants) == len(names) else set()
        if is_mmcv(name, "build_norm_layer") and positional and not isinstance(positional[0], Splat):
            # `(name, layer)`: the layer from the configuration dict's `type`
            layers = frozenset(norm_layers(positional[0]))
            postfix = positional[2] if len(positional) > 2 and not isinstance(positional[2], Splat) else None
            name = norm_layer_name(positional[0], named.get("postfix", postfix if postfix is not None else {Constant("")}))
            return {Sequence((name, layers), layers)} if layers else set()
        if is_norm_act_factory(name):
            # timm's `get_norm_act_layer(norm_layer, act_layer)`: `library/timm.py`
            first = known[0] if known else NOTHING
            return norm_act_layers(name, first | named.get("norm_layer", NOTHING))
        if name in STATE_UPDATING_WRAPPERS and known:
            # `spectral_norm(nn.Conv2d(...))`: the module, updating buffers on every forward
            return {Instance(name, arguments_of([("module", known[0])]))}
        if name in _COPIES and known:
            return set(known[0])  # `copy.deepcopy(norm_cfg)`
        if name in open_clip.CREATE_MODEL:
            return set(open_clip.created_models())  # its attributes: `open_clip.py`
        if name in open_clip.CREATE_MODEL_AND_TRANSFORMS:
            models = open_clip.created_models()
            items = (models, *(NOTHING,) * (open_clip.MODEL_AND_TRANSFORMS_ITEMS - 1))
            return {Sequence(items, models)}  # `model, _, preprocess = ...`
        if torchvision_model(name) is not None:
            return {Instance(name)}  # `torchvision.models.resnet50(weights=...)`: its children are library facts
        if name == "functools.partial" and known:
            found: set = set()
            for target in known[0]:
                bound = arguments_of({**dict(getattr(target, "bound", ())), **named}.items())
                if isinstance(target, ClassRef):
                    found.add(ClassRef(target.name, bound))
                elif isinstance(target, FunctionRef):
                    found.add(FunctionRef(target.name, target.frame, bound, (*target.positional, *known[1:])))
                elif isinstance(target, (Instance, Lambda)):
                    found.add(target)  # `partial(block, mask=mask)`: calling it runs the module
            return found
        if name.startswith("builtins.") or name in ("itertools.chain", "itertools.chain.from_iterable"):
            if short == "dict":
                entries = [(k, v) for k, v in named.items()]
                for mapping in (known[0] if known else ()):
                    if isinstance(mapping, Mapping):
                        entries = [*mapping.entries, *entries]
                    elif isinstance(mapping, Sequence) and mapping.items is not None:
                        # `dict([("conv", conv), ("bn", bn)])`, `OrderedDict([...])`: the pairs
                        pairs = [_pair(item) for item in mapping.items]
                        if all(pair is not None for pair in pairs):
                            entries = [*(pair for pair in pairs if pair is not None), *entries]
                return {Mapping(tuple(entries))}
            if short in ("list", "tuple") and known and self._sequence_items(known[0]):
                return {next(iter(known[0]))}  # `list(model.children())`: the items, in order
            if short in ("list", "tuple", "set", "reversed", "sorted", "iter") and known:
                return {Sequence(None, frozenset(self._elements(known[0])))}
            if short == "filter" and len(known) >= 2:
                return {Sequence(None, frozenset(self._elements(known[1])))}
            if short == "chain":
                return {Sequence(None, frozenset(self._elements(frozenset().union(*known)) if known else ()))}
            if short == "zip" and known:
                columns = [frozenset(self._elements(values)) for values in known]
                return {Sequence(None, frozenset({Sequence(tuple(columns), frozenset().union(*columns))}))}
            if short == "enumerate" and known:
                elements = frozenset(self._elements(known[0]))
                return {Sequence(None, frozenset({Sequence((NOTHING, elements), elements)}))}
            if short == "vars" and known:  # `vars(models)[args.arch]`: a project module's namespace
                return set().union(*(self._attribute_of(m, "__dict__") for m in known[0] if isinstance(m, ModuleRef)))
            if short == "getattr" and len(known) >= 2:
                names = {c.value for c in known[1] if isinstance(c, Constant) and isinstance(c.value, str)}
                found = set()
                for receiver in known[0]:
                    for attribute in names or {None}:
                        found |= self._attribute_of(receiver, attribute)
                return found
        return set()

    def _container_members(self, positional: list, named: dict) -> tuple[frozenset, ...]:
        """`Sequential(a, b)`, `Sequential(*blocks)`, `ModuleList(blocks)`, `ModuleDict({...})`,
        `Sequential(OrderedDict([(name, module), ...]))`."""
        members: list[frozenset] = []
        for values in positional:
            if isinstance(values, Splat):
                elements = frozenset(flatten_modules(self._elements(values.values), self._elements))
                if elements:
                    members.append(elements)  # `Sequential(*blocks)`: positions not known
                continue
            modules = {v for v in values if isinstance(v, Instance)}
            if modules:
                members.append(frozenset(modules))
                continue
            for mapping in (v for v in values if isinstance(v, Mapping)):  # `ModuleDict({"a": ...})`
                members.extend(frozenset(v for v in entry if isinstance(v, Instance)) for _, entry in mapping.entries)
            for element in self._elements(values):
                if isinstance(element, Sequence) and element.items is not None and len(element.items) == 2:
                    members.append(element.items[1])  # (name, module) pairs
                elif isinstance(element, Instance):
                    members.append(frozenset({element}))
        for values in named.values():
            members.append(frozenset(v for v in values if isinstance(v, Instance)))
        return tuple(m for m in members if m)

    def _container_keys(self, positional: list, named: dict, members: tuple) -> tuple[str, ...] | None:
        """The names of a `ModuleDict`'s members, when it is built from one mapping whose keys
        are literal names (`ModuleDict(dict(h=...))`, `ModuleDict({"stem": ...})`): those of
        the entries known to hold a module, which `members` holds in the same order."""
        if named or len(positional) != 1 or isinstance(positional[0], Splat) or len(positional[0]) != 1:
            return None
        mapping = next(iter(positional[0]))
        if not isinstance(mapping, Mapping):
            return None
        every = [key for key, _ in mapping.entries]
        keys = tuple(key for key, entry in mapping.entries if any(isinstance(v, Instance) for v in entry))
        if len(set(every)) != len(every) or not all(isinstance(key, str) for key in every) or len(keys) != len(members):
            return None
        return keys

    def _member_named(self, value: Instance, name: object) -> frozenset | None:
        """The member of a `ModuleDict` with known names that `name` (an attribute, a literal
        key) names; None when the names are not known."""
        if value.keys is None or value.members is None or not isinstance(name, str):
            return None
        return value.members[value.keys.index(name)] if name in value.keys else NOTHING

    def _with_added_members(self, values: set) -> set:
        """A local container and what was added to it (`result = nn.Sequential()`, then
        `result.add_module("bn", nn.BatchNorm2d(c))`, or `blocks.append(...)` on an
        `nn.ModuleList()`): each addition (a `Sequence` of what it adds) becomes a member of
        the container, in no known order. A local dict and what was stored in it under a
        literal key (`kwargs["norm_layer"] = nn.BatchNorm2d`): an entry of it, beside what
        the key held before (the store may not run: bindings are not ordered by flow). A
        dict the model does not know (a parameter, `ba` in timm's
        `EfficientNetBuilder._make_block(ba, ...)`): the entries stored in it are known, the
        rest is not (a `**ba` splat of it passes those keys, and others not known)."""
        stored = [v for v in values if isinstance(v, StoredItem)]
        if stored:
            mappings = [v for v in values if isinstance(v, Mapping)]
            values = (set(values) - set(stored) - set(mappings)) | {_with_entries(m, stored) for m in mappings}
            containers = any(isinstance(v, Instance) and is_container_class(v.cls) for v in values)
            if not mappings and not containers:
                values.add(_with_entries(Mapping(()), stored))
            if not mappings or containers:
                values |= {Sequence(None, item.values) for item in stored}  # a member added, as `append`
        containers = [v for v in values if isinstance(v, Instance) and v.members is not None and is_container_class(v.cls)]
        added = [v for v in values if isinstance(v, Sequence) and v.items is None]
        if not containers or not added:
            return values
        members = tuple(s.elements for s in added if s.elements)
        return (values - set(containers) - set(added)) | {
            replace(c, members=c.members + members, ordered=False, keys=None) for c in containers
        }

    def _index(self, values: frozenset, key) -> set:
        """`values[key]`, `key` a literal's value, ANY_KEY (not known) or OTHER_KEY (a value
        that is no literal). A mapping gives the entry of a literal key it holds, nothing for
        one it lacks (`NORMS[None]`, `NORMS["gn"]`), any of its entries for a key not known
        (`arch_settings[depth]`); a list any of its items for a key not known."""
        if isinstance(key, tuple) and key[:1] == ("slice",):
            return self._slice(values, slice(*key[1:]))
        found: set = set()
        for value in values:
            if isinstance(value, Sequence):
                if value.items is not None and isinstance(key, int) and -len(value.items) <= key < len(value.items):
                    found |= value.items[key]
                else:
                    found |= value.elements
            elif isinstance(value, Mapping):
                hits = [v for k, v in value.entries if key is ANY_KEY or k == key]
                for hit in hits:
                    found |= hit
            elif isinstance(value, Instance) and value.members is not None:
                named = self._member_named(value, key)
                if named is not None:
                    found |= named
                elif isinstance(key, int) and -len(value.members) <= key < len(value.members):
                    found |= value.members[key]
                else:
                    found |= frozenset().union(*value.members) if value.members else NOTHING
        return found

    def _slice(self, values: frozenset, part: slice) -> set:
        """`blocks[:-3]`: a list of the sliced items, a container of the sliced members (the
        whole when the positions are not known)."""
        found: set = set()
        for value in values:
            if isinstance(value, Sequence) and value.items is not None:
                items = value.items[part]
                found.add(Sequence(items, frozenset().union(*items) if items else NOTHING))
            elif isinstance(value, Instance) and value.members is not None and value.ordered:
                found.add(replace(value, members=value.members[part], keys=None))
            elif isinstance(value, (Sequence, Instance)):
                found.add(value)
        return found

    def _elements(self, values: Iterable[Value]) -> frozenset:
        found: set = set()
        for value in values:
            if isinstance(value, Sequence):
                found |= value.elements
            elif isinstance(value, Mapping):
                found |= {Constant(k) for k, _ in value.entries}
            elif isinstance(value, Instance) and value.members is not None:
                for members in value.members:
                    found |= members
        return frozenset(found)

    def _sequence_items(self, values: frozenset) -> list[frozenset]:
        """The items a `*` splat of these values passes, when their number is known."""
        if len(values) == 1:
            value = next(iter(values))
            if isinstance(value, Sequence) and value.items is not None:
                return list(value.items)
        return []

    def _sequence(self, items: tuple, frame: Frame) -> Sequence:
        known: list[frozenset] = []
        every: set = set()
        exact = True
        for item in items:
            if item[0] == "star":
                exact = False
                every |= self._elements(self._eval(item[1], frame))
            else:
                values = self._eval(item, frame)
                known.append(values)
                every |= values
        return Sequence(tuple(known) if exact else None, frozenset(every))

    def _mapping(self, entries: tuple, frame: Frame) -> Mapping:
        found: list = []
        for key, value in entries:
            values = self._eval(value, frame)
            if key is None:
                for mapping in values:
                    if isinstance(mapping, Mapping):
                        found.extend(mapping.entries)
            else:
                found.append((key, values))
        return Mapping(tuple(found))

    def _comprehension(self, element: Expr, generators: tuple, frame: Frame) -> frozenset:
        if not generators:
            return self._eval(element, frame)
        (target, iterable), rest = generators[0], generators[1:]
        values = self._elements(self._eval(iterable, frame))
        bound = [(name, frozenset(destructure(values, target, name, self._elements))) for name in names_in(target)]
        inner = replace(frame, locals=arguments_of([*frame.locals, *bound]))
        return self._comprehension(element, rest, inner)


def _with_entries(mapping: Mapping, stored: list[StoredItem]) -> Mapping:
    """`mapping` with the items stored in it: a key it holds gets the stored values too."""
    entries = list(mapping.entries)
    for item in stored:
        hits = [i for i, (key, _) in enumerate(entries) if key == item.key]
        for i in hits:
            entries[i] = (entries[i][0], entries[i][1] | item.values)
        if not hits:
            entries.append((item.key, item.values))
    return Mapping(tuple(entries))
