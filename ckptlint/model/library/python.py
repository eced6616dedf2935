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

# Python's `random` (3.12 reference, "Functions for integers / sequences / real-valued
# distributions"): the module-level functions that draw from its global generator, which
# torch's checkpoint neither saves nor restores; `seed`, `getstate` and `setstate` draw
# nothing. `random.Random(...)` / `SystemRandom()` make a generator of one's own.
PYTHON_RANDOM_DRAWS = frozenset(
    f"random.{name}" for name in (
        "random", "randint", "randrange", "randbytes", "getrandbits", "choice", "choices", "shuffle", "sample",
        "uniform", "triangular", "betavariate", "binomialvariate", "expovariate", "gammavariate", "gauss",
        "lognormvariate", "normalvariate", "vonmisesvariate", "paretovariate", "weibullvariate",
    )
)
PYTHON_RANDOM_GENERATORS = frozenset({"random.Random", "random.SystemRandom"})
