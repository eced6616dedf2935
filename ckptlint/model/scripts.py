"""Which files an FSDP use can apply to, by the project's entry scripts.

A script is a file of a directory that is not a package (no `__init__.py`): the project's top
level (`pretrain_fsdp.py` beside `sft.py`), or a folder of examples or scripts
(`examples/sharded/train.py`, run from its own directory and importing its siblings by their
bare names). A training script that no other script imports applies its FSDP use to itself,
to what it imports and to the project's package modules (whose models it may be handed), not
to the project's other training scripts (they train with `backward()` or a trainer), which
run on their own. Any other file's use (a package's sharding helper, called from anywhere)
applies everywhere.
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
    scripts = [other for other in index.files if _is_script(index, other)]
    imported = {target for script in scripts for target in _imports(index, script) if target != script}
    if path not in index.files or path not in scripts or path in imported:
        return EVERY_FILE
    reached, pending = {path}, [path]
    while pending:
        current = pending.pop()
        for target in _imports(index, current):
            if target not in reached:
                reached.add(target)
                pending.append(target)
    return EverythingBut(frozenset(
        other for other in scripts if other not in reached and other not in imported and _trains(index, other)
    ))


def _directory(path: str) -> str:
    return path.rpartition("/")[0]


def _is_script(index: ProjectIndex, path: str) -> bool:
    """A file of a directory that is not a package (the top level included)."""
    if path.endswith("__init__.py"):
        return False
    directory = _directory(path)
    return f"{directory}/__init__.py" not in index.files if directory else True


def _imports(index: ProjectIndex, path: str) -> set[str]:
    """The project files `path` imports: by absolute name, or, for a script, a sibling by its
    bare name (`from model import Net` in `examples/sharded/train.py`)."""
    facts = index.files.get(path)
    if facts is None:
        return set()
    directory = _directory(path)
    prefix = f"{directory.replace('/', '.')}." if directory and _is_script(index, path) else ""
    found = set()
    for _, absolute in facts.names:
        for name in (absolute, f"{prefix}{absolute}") if prefix else (absolute,):
            target = index.path_of(f"{name}.x") or index.path_of(name)
            if target is not None:
                found.add(target)
                break
    return found


def _trains(index: ProjectIndex, path: str) -> bool:
    """A training script: a function of it runs `backward()` or hands a model to a trainer."""
    facts = index.files.get(path)
    return facts is not None and any(e.kind in (EventKind.BACKWARD, EventKind.TRAINER) for f in facts.functions for e in f.events)

