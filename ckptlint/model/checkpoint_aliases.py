"""Torch's checkpoint functions under a name another module of the project gives them:

    utils/ckpt.py:       from torch.utils.checkpoint import checkpoint
                         recompute = torch.utils.checkpoint.checkpoint
    utils/__init__.py:   from .ckpt import checkpoint, recompute
    model.py:            from .utils import checkpoint      # a checkpoint site all the same

`checkpoint_aliases` maps such project names to the torch function; the site resolution
(`ckptlint.analysis.checkpoint_sites.CallableResolver`) and the gate of the site rules ask it.
A module-level partial that chooses the flag counts too, with the keywords it binds
(`checkpoint_alias_keywords`):

    utils/ckpt.py:       reentrant_ckpt = functools.partial(checkpoint, use_reentrant=True)
    model.py:            from .utils.ckpt import reentrant_ckpt
                         reentrant_ckpt(block, x, mask=mask)   # a reentrant checkpoint site
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ckptlint.model.facts import FileFacts
from ckptlint.model.library import TORCH_CHECKPOINT_FUNCTIONS
from ckptlint.model.summary import MODULE_LEVEL, dotted_absolute


# What a partial may bind for its name to stand for torch's checkpoint at a call of another
# module: literal flags only, `use_reentrant` among them (so the call's reentrancy is known
# and the partial's own file is where an omitted flag is reported).
_BOUND_FLAG = "use_reentrant"


def checkpoint_aliases(
    importing: Iterable[tuple[str, FileFacts]], reexporting: Callable[[], Iterable[tuple[str, FileFacts]]]
) -> tuple[dict[str, str], dict[str, tuple[tuple[str, object], ...]]]:
    """Absolute project name -> torch function, from the files importing a torch checkpoint
    function (`importing`) and the package `__init__` files re-exporting names
    (`reexporting`, two levels). A name its module also defines, or assigns otherwise, is
    none. Also the keywords the partials among them bind (name -> ((keyword, value), ...))."""
    found: dict[str, str] = {}
    bound: dict[str, tuple[tuple[str, object], ...]] = {}
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
            if local in defined:
                continue
            targets = {dotted_absolute(value, names) for value in values}
            if len(targets) == 1 and (target := targets.pop()) in TORCH_CHECKPOINT_FUNCTIONS:
                found[f"{facts.module}.{local}"] = target
            elif len(values) == 1 and (partial := _flag_partial(values[0], names)) is not None:
                found[f"{facts.module}.{local}"], bound[f"{facts.module}.{local}"] = partial
    for _ in range(2):
        for _, facts in reexporting() if found else ():
            for local, absolute in facts.names:
                if absolute in found:
                    found.setdefault(f"{facts.module}.{local}", found[absolute])
                    if absolute in bound:
                        bound.setdefault(f"{facts.module}.{local}", bound[absolute])
    return found, bound


def _flag_partial(value, names: dict[str, str]) -> tuple[str, tuple[tuple[str, object], ...]] | None:
    """`functools.partial(checkpoint, use_reentrant=True, preserve_rng_state=False)`: the
    torch function and the literal flags it binds; None for any other value (a partial
    binding inputs, a `**` splat, a value that is not a literal, no `use_reentrant`)."""
    if value[0] != "call" or dotted_absolute(value[1], names) != "functools.partial" or len(value[2]) != 1:
        return None
    target = dotted_absolute(value[2][0], names)
    keywords = value[3]
    if target not in TORCH_CHECKPOINT_FUNCTIONS or not all(
        name is not None and expr[0] == "const" and (expr[1] is None or isinstance(expr[1], bool)) for name, expr in keywords
    ):
        return None
    if _BOUND_FLAG not in {name for name, _ in keywords}:
        return None
    return target, tuple((name, expr[1]) for name, expr in keywords)
