"""Python's own behaviour the model follows: ordered dicts, string methods, container
methods that mutate."""

from __future__ import annotations

# Python's own: `OrderedDict([(name, module), ...])` is a mapping as `dict(...)` is, and the
# string methods the model evaluates on a known string before a table lookup
# (`norm.replace("_", "").lower()`, timm's `get_norm_layer`).
ORDERED_DICTS = frozenset({"collections.OrderedDict", "typing.OrderedDict"})
STRING_METHODS = frozenset({
    "lower", "upper", "strip", "lstrip", "rstrip", "replace", "removeprefix", "removesuffix", "casefold", "split",
})
# Container methods that mutate.
CONTAINER_MUTATORS = frozenset({"append", "extend", "insert", "update", "setdefault", "add", "pop", "clear"})
