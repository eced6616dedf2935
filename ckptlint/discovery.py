"""Which files to lint: walk the given paths, honour .gitignore files, `exclude` and
`extend-exclude`, never follow a directory link twice (symlink loops), and return a sorted,
de-duplicated list.

Paths named explicitly are linted even when excluded, unless `--force-exclude` is given
(pre-commit passes staged files by name, so its hook uses it).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PYTHON_SUFFIXES = (".py", ".pyi")


@dataclass(frozen=True)
class Discovered:
    files: tuple[Path, ...]
    # Paths that could not be read as directories or files: (path, reason).
    problems: tuple[tuple[Path, str], ...]


@lru_cache(maxsize=512)
def _spec(patterns: tuple[str, ...]):
    import pathspec

    return pathspec.PathSpec.from_lines("gitwildmatch", patterns)


def matches_any(relative_path: str, patterns: Sequence[str]) -> bool:
    """gitignore-style matching of a '/'-separated path relative to the project root; a
    pattern also matches any path below a matching directory."""
    if not patterns:
        return False
    spec = _spec(tuple(patterns))
    if spec.match_file(relative_path):
        return True
    parts = relative_path.split("/")
    return any(spec.match_file("/".join(parts[:i]) + "/") for i in range(1, len(parts)))


def relative_to_root(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


class _GitIgnores:
    """.gitignore files found on the way down, each applying below its own directory."""

    def __init__(self, root: Path, enabled: bool) -> None:
        self.enabled = enabled
        self._by_directory: dict[Path, object] = {}
        self.root = root

    def _load(self, directory: Path):
        if directory not in self._by_directory:
            spec = None
            ignore_file = directory / ".gitignore"
            if ignore_file.is_file():
                try:
                    lines = ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
                    spec = _spec(tuple(lines))
                except OSError:
                    spec = None
            self._by_directory[directory] = spec
        return self._by_directory[directory]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        if not self.enabled:
            return False
        # Every directory from the project root down to the path's parent may hold rules.
        try:
            relative_parts = path.relative_to(self.root).parts
        except ValueError:
            return False
        directory = self.root
        for depth in range(len(relative_parts)):
            spec = self._load(directory)
            if spec is not None:
                below = "/".join(relative_parts[depth:]) + ("/" if is_dir else "")
                if spec.match_file(below):
                    return True
            directory = directory / relative_parts[depth]
        return False


def discover(
    paths: Iterable[Path],
    *,
    project_root: Path,
    exclude: Sequence[str],
    extend_exclude: Sequence[str],
    respect_gitignore: bool = True,
    force_exclude: bool = False,
) -> Discovered:
    patterns = tuple(exclude) + tuple(extend_exclude)
    gitignores = _GitIgnores(project_root, respect_gitignore)
    files: set[Path] = set()
    problems: list[tuple[Path, str]] = []
    visited_directories: set[tuple[int, int]] = set()

    def excluded(path: Path, is_dir: bool) -> bool:
        absolute = path.absolute()
        relative = relative_to_root(absolute, project_root)
        return (
            matches_any(relative, patterns)
            or matches_any(absolute.name, patterns)
            or gitignores.ignored(absolute, is_dir)
        )

    def walk(directory: Path) -> None:
        try:
            stat = directory.stat()
        except OSError as error:
            problems.append((directory, _reason(error)))
            return
        key = (stat.st_dev, stat.st_ino)
        if key in visited_directories:
            return  # a symlink loop, or a second link to a directory already walked
        visited_directories.add(key)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as error:
            problems.append((directory, _reason(error)))
            return
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir()  # follows links; a dangling link is neither
            except OSError:
                is_dir = False
            if is_dir:
                if not excluded(path, True):
                    walk(path)
            elif entry.name.endswith(PYTHON_SUFFIXES) and not excluded(path, False):
                files.add(path)

    for raw in paths:
        path = Path(raw)
        if force_exclude and excluded(path, path.is_dir()):
            continue
        if path.is_dir():
            walk(path)
        elif path.exists() or path.is_symlink():
            files.add(path)  # named explicitly: linted whatever its suffix; unreadable ones too
        else:
            problems.append((path, "No such file or directory"))
    return Discovered(tuple(sorted(files)), tuple(sorted(problems)))


def _reason(error: OSError) -> str:
    return error.strerror or str(error)
