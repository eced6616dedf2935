"""Torch's checkpoint functions under a name another module of the project gives them:

    utils/ckpt.py:       from torch.utils.checkpoint import checkpoint
                         recompute = torch.utils.checkpoint.checkpoint
    utils/__init__.py:   from .ckpt import checkpoint, recompute
    model.py:            from .utils import checkpoint      # a checkpoint site all the same

A function that returns torch's checkpoint (openfold's `get_checkpoint_fn()`) counts as
well, under its name followed by `()`: `checkpoint = get_checkpoint_fn()` then
`checkpoint(block, x)` is a site. One that returns DeepSpeed's where DeepSpeed is configured
and torch's otherwise is a *possible* site (`checkpoint_alias_alternatives`).

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

from ckptlint.model.file_facts.facts import FileFacts
from ckptlint.model.library.torch import TORCH_CHECKPOINT_FUNCTIONS
from ckptlint.model.form.summary import MODULE_LEVEL, dotted_absolute


# What a partial may bind for its name to stand for torch's checkpoint at a call of another
# module: literal flags only, `use_reentrant` among them (so the call's reentrancy is known
# and the partial's own file is where an omitted flag is reported).
_BOUND_FLAG = "use_reentrant"


def checkpoint_aliases(
    importing: Iterable[tuple[str, FileFacts]], reexporting: Callable[[], Iterable[tuple[str, FileFacts]]]
) -> tuple[dict[str, str], dict[str, tuple[tuple[str, object], ...]], dict[str, tuple[str, ...]]]:
    """Absolute project name -> torch function, from the files importing a torch checkpoint
    function (`importing`) and the package `__init__` files re-exporting names
    (`reexporting`, two levels). A name its module also defines, or assigns otherwise, is
    none. Also the keywords the partials among them bind (name -> ((keyword, value), ...)),
    and the other libraries' functions a getter may return instead (name -> names)."""
    found: dict[str, str] = {}
    bound: dict[str, tuple[tuple[str, object], ...]] = {}
    alternatives: dict[str, tuple[str, ...]] = {}  # a getter's other libraries' functions
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
        for summary in facts.summaries:
            returned = returned_checkpoint_function(summary, names)
            if returned is not None:
                found[f"{summary.name}()"] = returned[0]
                if returned[1]:
                    alternatives[f"{summary.name}()"] = returned[1]
    for _ in range(2):
        for _, facts in reexporting() if found else ():
            for local, absolute in facts.names:
                for suffix in ("", "()"):
                    if f"{absolute}{suffix}" in found:
                        name = f"{facts.module}.{local}{suffix}"
                        found.setdefault(name, found[f"{absolute}{suffix}"])
                        for table in (bound, alternatives):
                            if f"{absolute}{suffix}" in table:
                                table.setdefault(name, table[f"{absolute}{suffix}"])
    return found, bound, alternatives


# Where a getter may return another library's checkpoint instead of torch's.
_OTHER_CHECKPOINTS = ("deepspeed.",)


def returned_checkpoint_function(summary, names: dict[str, str]) -> tuple[str, tuple[str, ...]] | None:
    """(torch function, other libraries' functions it may return instead) for a function
    without parameters that returns torch's checkpoint, directly or through a local name
    (`checkpoint = deepspeed.checkpointing.checkpoint if ... else torch.utils.checkpoint.checkpoint`);
    None for anything else."""
    if summary.name.endswith(MODULE_LEVEL) or summary.parameters or not summary.returns:
        return None
    local: dict[str, list] = {}
    for binding in summary.bindings:
        if binding.pattern[0] == "name":
            local.setdefault(binding.pattern[1], []).append(binding.value)
    targets: set[str] = set()
    for expr, _ in summary.returns:
        values = local.get(expr[1], [None]) if expr[0] == "name" and expr[1] in local else [expr]
        for value in values:
            target = dotted_absolute(value, names) if value is not None else None
            if target is None:
                return None
            targets.add(target)
    torch = targets & TORCH_CHECKPOINT_FUNCTIONS
    others = targets - torch
    if len(torch) != 1 or not all(other.startswith(_OTHER_CHECKPOINTS) for other in others):
        return None
    return torch.pop(), tuple(sorted(others))


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
