"""Building project indexes: which project a file belongs to, and the facts of every Python
file under that project's root, cached by content.

A directory holding `pyproject.toml`, `setup.cfg`, `setup.py` or `.git` below the run's
project root is a project of its own (a monorepo package, an example project): its files
are indexed together, its declared dependency versions apply to them, and they are not
part of the enclosing project's index.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ckptlint.cache import CacheFile
from ckptlint.config import ROOT_MARKERS, Settings
from ckptlint.discovery import discover, relative_to_root
from ckptlint.source import read_source_bytes
from ckptlint.project import FileFacts, ProjectIndex, extract_facts, text_digest

# Below this many files to extract, a process pool costs more than it saves.
PARALLEL_EXTRACTION_THRESHOLD = 256


def _has_marker(directory: Path) -> bool:
    return any((directory / marker).exists() for marker in ROOT_MARKERS)


class Projects:
    """The projects of one run: each file's project root, its settings and its index, each
    computed once."""

    def __init__(self, settings: Settings, *, use_cache: bool = True, jobs: int | None = None, build: bool = True) -> None:
        self.settings = settings
        self.use_cache = use_cache
        self.jobs = jobs
        self.build = build  # False when no selected rule reads the index
        self._roots: dict[Path, Path] = {}
        self._indexes: dict[Path, ProjectIndex] = {}
        self._settings: dict[Path, Settings] = {}

    def root_of(self, path: Path) -> Path:
        """The nearest directory at or below the run's root that is a project root; for a
        file outside the run's root, its own nearest project root."""
        outer = self.settings.project_root
        directory = path.absolute().parent
        if directory in self._roots:
            return self._roots[directory]
        chain = []
        current = directory
        found = None
        while True:
            chain.append(current)
            if current == outer:
                found = outer
                break
            if _has_marker(current):
                found = current
                break
            if current.parent == current:
                found = outer if outer in directory.parents or directory == outer else directory
                break
            current = current.parent
        for item in chain:
            self._roots[item] = found
        return found

    def settings_for(self, root: Path) -> Settings:
        if root not in self._settings:
            self._settings[root] = self.settings.for_project(root)
        return self._settings[root]

    def index_for(self, root: Path) -> ProjectIndex:
        if root not in self._indexes:
            self._indexes[root] = (
                build_index(root, self.settings_for(root), use_cache=self.use_cache, jobs=self.jobs)
                if self.build
                else ProjectIndex(root)
            )
        return self._indexes[root]

    def indexes(self) -> dict[Path, ProjectIndex]:
        return dict(self._indexes)


def project_files(root: Path, settings: Settings) -> list[Path]:
    """Every Python file of the project: under its root, minus excludes and .gitignore'd
    files, minus nested projects."""
    found = discover(
        [root],
        project_root=root,
        exclude=settings.exclude,
        extend_exclude=settings.extend_exclude,
        respect_gitignore=settings.respect_gitignore,
    )
    nested: dict[Path, bool] = {root: False}

    def inside_nested(directory: Path) -> bool:
        chain = []
        while directory not in nested and directory.parent != directory:
            chain.append(directory)
            directory = directory.parent
        result = nested.get(directory, False)
        for item in reversed(chain):  # outermost first: a marker above decides for all below
            result = result or _has_marker(item)
            nested[item] = result
        return result

    return [path for path in found.files if not inside_nested(path.absolute().parent)]


def _extract(item: tuple[Path, str]) -> tuple[FileFacts, str] | None:
    path, relative = item
    try:
        text = read_source_bytes(path).decode("utf-8", errors="replace")
    except OSError:
        return None
    return extract_facts(text, relative), text_digest(text)


def build_index(root: Path, settings: Settings, *, use_cache: bool = True, jobs: int | None = None) -> ProjectIndex:
    cache = _IndexCache(settings, root) if use_cache else None
    files: dict[str, FileFacts] = {}
    digests: dict[str, str] = {}
    pending: list[tuple[Path, str]] = []
    for path in project_files(root, settings):
        relative = relative_to_root(path.absolute(), root)
        if cache is not None:
            try:
                digest = text_digest(read_source_bytes(path).decode("utf-8", errors="replace"))
            except OSError:
                continue
            cached = cache.get(relative, digest)
            if cached is not None:
                files[relative], digests[relative] = cached, digest
                continue
        pending.append((path, relative))

    workers = jobs or os.cpu_count() or 1
    if workers > 1 and len(pending) >= PARALLEL_EXTRACTION_THRESHOLD:
        pool = ProcessPoolExecutor(max_workers=workers)
        try:
            extracted = list(pool.map(_extract, pending, chunksize=max(1, len(pending) // (workers * 8))))
        finally:
            # On an interrupt, drop the queued files instead of extracting them all first.
            pool.shutdown(wait=True, cancel_futures=True)
    else:
        extracted = [_extract(item) for item in pending]
    for (_, relative), result in zip(pending, extracted):
        if result is None:
            continue
        files[relative], digests[relative] = result
        if cache is not None:
            cache.put(relative, digests[relative], files[relative])
    if cache is not None:
        cache.save()
    return ProjectIndex(root, dict(sorted(files.items())), digests)


class _IndexCache(CacheFile):
    """Facts by relative path and content digest, one file per project root."""

    def __init__(self, settings: Settings, root: Path) -> None:
        key = hashlib.sha256(str(root.absolute()).encode()).hexdigest()[:16]
        super().__init__(settings.cache_dir or root / ".ckptlint_cache", f"index-{key}.json")

    def get(self, relative: str, digest: str) -> FileFacts | None:
        entry = self._entries.get(relative)
        if not isinstance(entry, dict) or entry.get("digest") != digest:
            return None
        try:
            return FileFacts.from_json(entry["facts"])
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def put(self, relative: str, digest: str, facts: FileFacts) -> None:
        self._entries[relative] = {"digest": digest, "facts": facts.to_json()}
        self._dirty = True
