"""What the analysis says about a checkpointing call's arguments, without libcst: the recipe
checks (YAML, JSON, launch scripts) share these with the Python rules."""

from __future__ import annotations

import enum

# Keys the Trainer (transformers >= 5.0) consumes itself before calling checkpoint.
TRAINER_OWN_KEYS = frozenset({"every_n_layers", "offload"})


class Reentrancy(str, enum.Enum):
    EXPLICIT_TRUE = "use_reentrant=True"
    EXPLICIT_FALSE = "use_reentrant=False"
    IMPLICIT = "omitted (torch defaults to reentrant)"
    UNKNOWN = "not known statically"

    @property
    def is_reentrant(self) -> bool:
        return self in (Reentrancy.EXPLICIT_TRUE, Reentrancy.IMPLICIT)


class KwargsShape(str, enum.Enum):
    """What `gradient_checkpointing_kwargs` is."""

    DEFAULT = "not given (the library default applies)"
    WITH_FLAG = "a dict with `use_reentrant`"
    WITHOUT_FLAG = "a dict without `use_reentrant`"
    UNKNOWN = "not known statically"
