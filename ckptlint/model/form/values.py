"""The values the model's evaluator answers with (`ckptlint.model.evaluation.denotation`): abstract
objects of the analysed program, hashable, and the helpers that take them apart."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Union

from ckptlint.model.form.summary import Expr

Arguments = tuple  # ((name, frozenset[Value]), ...), sorted by name


@dataclass(frozen=True)
class Constant:
    value: object


@dataclass(frozen=True)
class ClassRef:
    name: str  # absolute
    bound: Arguments = ()  # `partial(Class, **bound)`


@dataclass(frozen=True)
class ModuleRef:
    """A module of the project (`from train import trainers`): what `getattr(trainers,
    config.trainer)` or `models.__dict__[args.arch]` reads a class or function from."""

    name: str  # absolute


@dataclass(frozen=True)
class Instance:
    cls: str  # absolute
    arguments: Arguments = ()  # what the constructor got, by parameter name (or `#0`...)
    members: tuple[frozenset, ...] | None = None  # torch containers: their members, in order
    ordered: bool = True  # False: a member came from a `*` splat, positions are not known
    # Looked at on its own (the `self` of the method a rule asks about, a class wrapped for
    # checkpointing): a constructor parameter nothing binds is what the project's
    # constructor calls pass.
    generic: bool = False
    # A `ModuleDict` built from a mapping of literal names: the name of each member, in order
    # (`self.transformer = nn.ModuleDict(dict(wte=..., h=...))`; `self.transformer.h`).
    keys: tuple[str, ...] | None = None

    @property
    def short_name(self) -> str:
        return self.cls.rsplit(".", 1)[-1]

    def argument(self, name: str, position: int | None = None) -> frozenset | None:
        for key, values in self.arguments:
            if key == name or (position is not None and key == f"#{position}"):
                return values
        return None


@dataclass(frozen=True)
class Frame:
    """Where an expression is evaluated: a function (None: a module's top-level code), the
    values its parameters and closure are bound to, its `self`, the frame it is nested in."""

    function: str | None
    module: str
    arguments: Arguments = ()
    self_instance: Instance | None = None
    parent: Frame | None = None
    locals: Arguments = ()  # comprehension targets
    before: int | None = None  # only bindings on earlier lines are seen (a binding's own value)
    # The function is looked at on its own (a rule asks about a line of it), not as called
    # from somewhere the model follows: a parameter nothing else binds is what the project's
    # call sites pass it.
    entry: bool = False


@dataclass(frozen=True)
class FunctionRef:
    name: str  # absolute (for a library function: as imported)
    frame: Frame | None = None  # a method's `self` / a nested function's closure
    bound: Arguments = ()  # `partial(function, **bound)`
    positional: tuple[frozenset, ...] = ()  # `partial(function, *positional)`


@dataclass(frozen=True)
class SuperView:
    """`super()` in a method of class `defined_in` running on `instance`: its attributes are
    those of the classes after `defined_in` among the instance's ancestors (`super().forward(x)`
    in a subclass runs its base's `forward`)."""

    instance: Instance
    defined_in: str


@dataclass(frozen=True)
class Lambda:
    """A lambda written at a checkpoint call: the callees of its body, in its frame."""

    calls: tuple[Expr, ...]
    frame: Frame


@dataclass(frozen=True)
class Sequence:
    items: tuple[frozenset, ...] | None  # known positions
    elements: frozenset  # every element


@dataclass(frozen=True)
class Mapping:
    entries: tuple[tuple[object, frozenset], ...]


@dataclass(frozen=True)
class StoredItem:
    """`d["key"] = value` on a local name: what the name's mapping then holds under `key`,
    merged into it (or into its container) where the name is read
    (`Denotation._with_added_members`); never a value of its own."""

    key: str
    values: frozenset


Value = Union[Constant, ClassRef, ModuleRef, Instance, FunctionRef, Lambda, Sequence, Mapping]
NOTHING: frozenset = frozenset()
# The key of `values[key]` when it is not a known literal: every entry may be the one read.
ANY_KEY = object()
# A key that is a value but no literal (`norms[pair(x)]`): no literal key of a mapping.
OTHER_KEY = object()
# Evaluation steps one query of the model may take (`OutOfBudget` past them). Sized on timm
# (1,000+ files), whose EfficientNet builder's blocks take ~28,000: a query that runs out
# answers "not known", and what it had found stays unused.
QUERY_BUDGET = 40_000


class OutOfBudget(Exception):
    pass


@dataclass(frozen=True)
class Splat:
    """A `*` argument whose items are not known one by one: the positions after it are not
    known either."""

    values: frozenset


def ordering_key(value: object) -> str:
    """`repr(value)` with every set's items in order: the key to sort values by so that the
    same project gives the same findings in every run (a frozenset's own `repr` lists its
    items in hash order, which for strings changes with each process's hash seed)."""
    if isinstance(value, frozenset):
        return f"frozenset({{{', '.join(sorted(map(ordering_key, value)))}}})" if value else "frozenset()"
    if isinstance(value, tuple):
        items = [ordering_key(item) for item in value]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = (f"{field.name}={ordering_key(getattr(value, field.name))}" for field in dataclasses.fields(value) if field.repr)
        return f"{type(value).__qualname__}({', '.join(fields)})"
    return repr(value)


def arguments_of(pairs: Iterable[tuple[str, frozenset]]) -> Arguments:
    return tuple(sorted(pairs, key=lambda pair: pair[0]))


def single(truths) -> bool | None:
    """The one truth all values agree on, else None."""
    found = set(truths)
    if len(found) == 1 and None not in found:
        return found.pop()
    return None


def truthiness(value: Value) -> bool | None:
    if isinstance(value, Constant):
        return bool(value.value)
    if isinstance(value, (ClassRef, ModuleRef, Instance, FunctionRef, Lambda)):
        return True
    return None


def falsy(value: Value) -> bool:
    return isinstance(value, Constant) and not value.value


def names_in(target: Expr) -> Iterator[str]:
    if target[0] == "name":
        yield target[1]
    elif target[0] == "seq":
        for item in target[1]:
            yield from names_in(item)
    elif target[0] == "star":
        yield from names_in(target[1])


def destructure(values: Iterable[Value], target: Expr, name: str, elements) -> Iterator[Value]:
    """The values `name` gets when `values` are unpacked into `target`."""
    if target[0] == "name":
        if target[1] == name:
            yield from values
        return
    if target[0] == "star":
        yield Sequence(None, frozenset(elements(values)))
        return
    if target[0] != "seq":
        return
    items = target[1]
    position = next((i for i, item in enumerate(items) if name in set(names_in(item))), None)
    if position is None:
        return
    starred = any(item[0] == "star" for item in items)
    for value in values:
        if isinstance(value, Sequence) and value.items is not None and not starred and len(value.items) == len(items):
            yield from destructure(value.items[position], items[position], name, elements)
        else:
            yield from destructure(elements((value,)), items[position], name, elements)


def flatten_modules(values: Iterable[Value], elements) -> Iterator[Instance]:
    """The module instances among values: containers of them (lists, dicts) unpacked."""
    pending = list(values)
    seen: set = set()
    while pending:
        value = pending.pop()
        if value in seen:
            continue
        seen.add(value)
        if isinstance(value, Instance):
            yield value
        elif isinstance(value, (Sequence, Mapping)):
            pending.extend(elements((value,)) if isinstance(value, Sequence) else
                           [v for _, vs in value.entries for v in vs])
