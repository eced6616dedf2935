"""NumPy's random numbers, as the model follows them (numpy 2.4 reference, "Random sampling")."""

from __future__ import annotations

# `numpy.random.<name>`: every function draws from NumPy's global `RandomState` (legacy
# `rand`, `randn`, `randint`, `choice`, `shuffle`, `permutation`, `binomial`, ...), except
# these, which seed it, read or set its state, or build generators and bit generators.
NUMPY_RANDOM_NOT_DRAWING = frozenset({
    "seed", "get_state", "set_state", "default_rng", "RandomState", "Generator", "SeedSequence", "BitGenerator",
    "PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64", "get_bit_generator", "set_bit_generator", "bit_generator",
})
# What makes a generator of one's own; its methods (`rng.random()`, `rng.integers(...)`,
# `rng.normal(...)`) draw, except `spawn` and reading or setting its state.
NUMPY_GENERATORS = frozenset({"numpy.random.default_rng", "numpy.random.RandomState", "numpy.random.Generator"})
GENERATOR_METHODS_NOT_DRAWING = frozenset({
    "spawn", "bit_generator", "seed", "get_state", "set_state", "getstate", "setstate", "jumped", "manual_seed",
    "initial_seed", "device",
})
