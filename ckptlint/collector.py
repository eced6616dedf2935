"""CPython's cyclic garbage collector, set for ckptlint's own processes (`ckptlint.cli`).

An analysis allocates syntax trees of hundreds of thousands of nodes (CPython's, libcst's)
and holds a project's facts, nearly none of it garbage in a cycle: with CPython's default
thresholds (a young collection every 700 allocations, the oldest generation every 100 of
those) the collector walks them again and again for nothing. On transformers' `trainer.py`
(5,000 lines) a lint in the editor's worker took 1.5-1.9 s, of which collections finding
nothing took a fifth. mypy runs with the same setting, for the same reason.

The worker processes inherit the setting with the fork; what their parent held when it
forked them is frozen out of their collections altogether (`ckptlint.worker_pool`).
"""

from __future__ import annotations

import gc
import platform

YOUNG_COLLECTION_ALLOCATIONS = 200_000
OLDER_COLLECTION_EVERY = 30  # collections of the generation below


def tune() -> None:
    """Collect less often (above); nothing on other Pythons than CPython."""
    if platform.python_implementation() == "CPython":
        gc.set_threshold(YOUNG_COLLECTION_ALLOCATIONS, OLDER_COLLECTION_EVERY, OLDER_COLLECTION_EVERY)
