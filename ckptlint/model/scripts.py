"""Which files an FSDP use can apply to, by the project's entry scripts: a top-level training
script that no other top-level file imports (`pretrain_fsdp.py` beside `sft.py`) applies to
itself, what it imports and the project's modules (whose models it may be handed), not to
the project's other top-level training scripts (they train with `backward()` or a trainer),
which run on their own. Any other file's use (a package's sharding helper, called from
anywhere) applies everywhere.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptlint.model.facts import EventKind

if TYPE_CHECKING:
    from ckptlint.model.index import ProjectIndex


class EverythingBut:
    """Every file but some."""

    def __init__(self, excluded: frozenset[str] = frozenset()) -> None:
        self.excluded = excluded

    def __contains__(self, item) -> bool:
        return item not in self.excluded


EVERY_FILE = EverythingBut()


def reached_by(index: ProjectIndex, path: str) -> EverythingBut:
    """The files an FSDP use in `path` can apply to."""
    facts = index.files.get(path)
    module = facts.module if facts is not None else ""
    if facts is None or "." in module or path.endswith("__init__.py") or _imported_by_a_script(index, module):
        return EVERY_FILE
    reached, pending = {path}, [path]
    while pending:
        current = index.files.get(pending.pop())
        for _, absolute in current.names if current is not None else ():
            target = index.path_of(f"{absolute}.x") or index.path_of(absolute)
            if target is not None and target not in reached:
                reached.add(target)
                pending.append(target)
    return EverythingBut(frozenset(
        other for name, other in index.module_paths.items()
        if "." not in name and other not in reached and not other.endswith("__init__.py")
        and _trains(index, other) and not _imported_by_a_script(index, name)
    ))


def _trains(index: ProjectIndex, path: str) -> bool:
    """A training script: a function of it runs `backward()` or hands a model to a trainer."""
    facts = index.files.get(path)
    return facts is not None and any(e.kind in (EventKind.BACKWARD, EventKind.TRAINER) for f in facts.functions for e in f.events)


def _imported_by_a_script(index: ProjectIndex, module: str) -> bool:
    """Whether another top-level file of the project imports `module`."""
    for name, path in index.module_paths.items():
        if "." in name or name == module:
            continue
        facts = index.files.get(path)
        if facts is not None and any(a == module or a.startswith(f"{module}.") for _, a in facts.names):
            return True
    return False
