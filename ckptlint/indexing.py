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
from collections.abc import Mapping
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from ckptlint.cache import CacheFile
from ckptlint.config import ROOT_MARKERS, Settings
from ckptlint.discovery import discover, relative_to_root
from ckptlint.source import read_source_bytes
from ckptlint.project import (
    FileFacts,
    LazyFacts,
    ProjectIndex,
    exported_digest,
    extract_facts,
    fingerprint_of,
    module_name,
    text_digest,
)

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
    built: dict[str, FileFacts] = {}
    digests: dict[str, str] = {}
    exported: dict[str, str] = {}  # relative path -> what other files can observe of it
    pending: list[tuple[Path, str]] = []
    paths: dict[str, Path] = {}
    for path in project_files(root, settings):
        relative = relative_to_root(path.absolute(), root)
        paths[relative] = path
        if cache is not None:
            try:
                digest = text_digest(read_source_bytes(path).decode("utf-8", errors="replace"))
            except OSError:
                continue
            piece = cache.exported(relative, digest)
            if piece is not None:
                digests[relative], exported[relative] = digest, piece
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
        built[relative], digests[relative] = result
        exported[relative] = exported_digest(built[relative])
        if cache is not None:
            cache.put(relative, digests[relative], built[relative], exported[relative])

    def load(relative: str) -> FileFacts:
        """Facts not built in this run: from the cache, else extracted again."""
        raw = cache.facts_json(relative, digests[relative]) if cache is not None else None
        if raw is not None:
            try:
                return FileFacts.from_json(raw)
            except (KeyError, TypeError, ValueError, AttributeError):
                pass  # a corrupt entry
        result = _extract((paths[relative], relative))
        return result[0] if result is not None else FileFacts(module_name(relative))

    # The fingerprint from each file's exported part: an unchanged project, or one whose
    # edits other files cannot observe, never builds the facts for it.
    index = ProjectIndex(root, LazyFacts(sorted(digests), built, load), digests, fingerprint_of(exported.items()))
    if cache is not None:
        cache.retain(set(digests))
        cache.save()
    return index


class _IndexCache:
    """Two files per project root: `index-<key>.json` holds each file's content digest and
    exported digest (read on every run), `facts-<key>.json` the facts themselves (read
    only when a rule asks for them). Each facts entry repeats its digest, so files written by
    concurrent runs never pair a digest with the facts of other content."""

    def __init__(self, settings: Settings, root: Path) -> None:
        key = hashlib.sha256(str(root.absolute()).encode()).hexdigest()[:16]
        self._directory = settings.cache_dir or root / ".ckptlint_cache"
        self._digests = CacheFile(self._directory, f"index-{key}.json")
        self._facts_name = f"facts-{key}.json"
        self._facts: CacheFile | None = None

    def _facts_file(self) -> CacheFile:
        if self._facts is None:
            self._facts = CacheFile(self._directory, self._facts_name)
        return self._facts

    def exported(self, relative: str, digest: str) -> str | None:
        """The exported digest of a file cached with this content digest."""
        entry = self._digests._entries.get(relative)
        if isinstance(entry, dict) and entry.get("digest") == digest and isinstance(entry.get("exported"), str):
            return entry["exported"]
        return None

    def facts_json(self, relative: str, digest: str) -> Mapping | None:
        """The cached facts (as JSON) of a file with this digest."""
        entry = self._facts_file()._entries.get(relative)
        if not isinstance(entry, dict) or entry.get("digest") != digest or not isinstance(entry.get("facts"), dict):
            return None
        return entry["facts"]

    def put(self, relative: str, digest: str, facts: FileFacts, exported: str) -> None:
        self._digests._entries[relative] = {"digest": digest, "exported": exported}
        self._facts_file()._entries[relative] = {"digest": digest, "facts": facts.to_json()}
        self._digests.mark_dirty()
        self._facts_file().mark_dirty()

    def retain(self, relatives: set[str]) -> None:
        """Forget files no longer in the project."""
        for store in (self._digests, self._facts):
            if store is not None and set(store._entries) - relatives:
                store._entries = {k: v for k, v in store._entries.items() if k in relatives}
                store.mark_dirty()

    def save(self) -> str | None:
        warnings = [store.save() for store in (self._facts, self._digests) if store is not None]
        return next((w for w in warnings if w), None)
