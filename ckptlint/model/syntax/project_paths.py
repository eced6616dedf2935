"""Which files of a project are scripts, and its top-level folders: questions about the
project's paths alone (`ckptlint.model.project.scripts` asks them; the index compares their
answers between runs, `ckptlint.indexing`)."""

from __future__ import annotations

from collections.abc import Collection, Iterable


def script_paths(paths: Collection[str]) -> frozenset[str]:
    """The scripts among a project's paths: the files of a directory that is not a package
    (no `__init__.py`; the top level included)."""
    present = set(paths)
    return frozenset(
        path for path in present
        if not path.endswith("__init__.py") and (not (parent := directory(path)) or f"{parent}/__init__.py" not in present)
    )


def top_folders(paths: Iterable[str]) -> frozenset[str]:
    """The top-level folders the project's paths lie in."""
    return frozenset(folder for path in paths if (folder := top_folder(path)))


def top_folder(path: str) -> str:
    """The top-level folder of a project path ("" for a file at the root)."""
    return path.partition("/")[0] if "/" in path else ""


def directory(path: str) -> str:
    """The directory of a project path ("" at the root)."""
    return path.rpartition("/")[0]
