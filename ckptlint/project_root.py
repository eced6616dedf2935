"""Where a project starts: the nearest directory, from a file up, that marks a project
root (pyproject.toml, setup.cfg, setup.py, .git). Cross-file facts come from every file
under it."""

from __future__ import annotations

import os
from collections.abc import Container
from pathlib import Path

ROOT_MARKERS = ("pyproject.toml", "setup.cfg", "setup.py", ".git")
# `setup.py` / `setup.cfg` beside an `__init__.py` is a module of a package (`trainer/setup.py`
# building the accelerator), not a project of its own.
_PACKAGE_MODULE_MARKERS = ("setup.py", "setup.cfg")
# The names a directory listing must keep for `marks_project_root` to decide.
ROOT_DECIDING_NAMES = frozenset((*ROOT_MARKERS, "__init__.py"))


def marks_project_root(names: Container[str]) -> bool:
    """Whether a directory holding `names` is a project root."""
    if "pyproject.toml" in names or ".git" in names:
        return True
    return "__init__.py" not in names and any(marker in names for marker in _PACKAGE_MODULE_MARKERS)


def is_project_root(directory: Path | str) -> bool:
    """`marks_project_root` for a directory on disk."""
    return marks_project_root({name for name in ROOT_DECIDING_NAMES if os.path.exists(os.path.join(directory, name))})


def find_project_root(start: Path) -> Path:
    start = start.resolve()
    directory = start if start.is_dir() else start.parent
    for candidate in (directory, *directory.parents):
        if is_project_root(candidate):
            return candidate
    return directory
