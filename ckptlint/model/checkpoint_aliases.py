"""Torch's checkpoint functions under a name another module of the project gives them:

    utils/ckpt.py:       from torch.utils.checkpoint import checkpoint
                         recompute = torch.utils.checkpoint.checkpoint
    utils/__init__.py:   from .ckpt import checkpoint, recompute
    model.py:            from .utils import checkpoint      # a checkpoint site all the same

`checkpoint_aliases` maps such project names to the torch function; the site resolution
(`ckptlint.analysis.checkpoint_sites.CallableResolver`) and the gate of the site rules ask it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ckptlint.model.facts import FileFacts
from ckptlint.model.library import TORCH_CHECKPOINT_FUNCTIONS
from ckptlint.model.summary import MODULE_LEVEL, dotted_absolute


def checkpoint_aliases(
    importing: Iterable[tuple[str, FileFacts]], reexporting: Callable[[], Iterable[tuple[str, FileFacts]]]
) -> dict[str, str]:
    """Absolute project name -> torch function, from the files importing a torch checkpoint
    function (`importing`) and the package `__init__` files re-exporting names
    (`reexporting`, two levels). A name its module also defines, or assigns otherwise, is
    none."""
    found: dict[str, str] = {}
    for _, facts in importing:
        names = dict(facts.names)
        top = next((s for s in facts.summaries if s.name == f"{facts.module}.{MODULE_LEVEL}"), None)
        assigned: dict[str, list] = {}
        for binding in top.bindings if top is not None else ():
            if binding.pattern[0] == "name":
                assigned.setdefault(binding.pattern[1], []).append(binding.value)
        defined = set(top.nested) if top is not None else set()
        for local, absolute in facts.names:
            if absolute in TORCH_CHECKPOINT_FUNCTIONS and local not in defined and local not in assigned:
                found[f"{facts.module}.{local}"] = absolute
        for local, values in assigned.items():
            targets = {dotted_absolute(value, names) for value in values}
            if len(targets) == 1 and (target := targets.pop()) in TORCH_CHECKPOINT_FUNCTIONS and local not in defined:
                found[f"{facts.module}.{local}"] = target
    for _ in range(2):
        for _, facts in reexporting() if found else ():
            for local, absolute in facts.names:
                if absolute in found:
                    found.setdefault(f"{facts.module}.{local}", found[absolute])
    return found
