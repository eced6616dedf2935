"""Building project indexes: which project a file belongs to, and the facts of every Python
file under that project's root, cached by content.

A directory holding `pyproject.toml`, `setup.cfg`, `setup.py` or `.git` below the run's
project root is a project of its own (a monorepo package, an example project): its files
are indexed together, its declared dependency versions apply to them, and they are not
part of the enclosing project's index.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from ckptlint.cache import FACTS_PREFIX, TABLE_SUFFIX, CacheFile, save_cache_file
from ckptlint.config import Settings
from ckptlint.project_root import is_project_root, marks_project_root
from ckptlint.discovery import (
    CONFIGURATION_INCLUDE,
    INDEXED_INCLUDE,
    INDEXED_SUFFIXES,
    RACY_WINDOW_NS,
    absolute_text,
    relative_to_root,
    stat_key,
)
from ckptlint.source import content_digest, read_source_bytes
from ckptlint.limits import AnalysisLimits
from ckptlint.walk_cache import discover_remembered
from ckptlint.worker_pool import TaskFailure, WorkerPool, workers_for
from ckptlint.model.file_facts.facts import FileFacts
from ckptlint.model.syntax.file_kinds import CONFIGURATION_SUFFIXES
from ckptlint.model.file_facts.fingerprints import exported_digest, fingerprint_of
from ckptlint.model.index import ProjectIndex, cross_file_kinds
from ckptlint.model.project.project_facts import LazyFacts
from ckptlint.model.project.reads import (
    ALL_SCRIPTS, TOP_FOLDERS, ReadLog, ReadRevision, changed_keys, contributions, cutoff_changes, module_existence_keys,
)
from ckptlint.model.syntax.project_paths import script_paths, top_folders
from ckptlint.model.syntax.names import module_name
from ckptlint.notebooks import NotebookError, is_notebook_path, read_notebook

# Below this many files to extract, or bytes of them, a second worker process costs more
# than it saves.
PARALLEL_EXTRACTION_THRESHOLD = 256
PARALLEL_EXTRACTION_BYTES = 256 << 10
# Past this many keys remembered as changed, the next change starts a new floor instead.
_MAX_CHANGED_KEYS = 200_000


def _has_marker(directory: str | Path, listings: Mapping[str, frozenset[str]] | None = None) -> bool:
    """Whether the directory holds a project marker; from its listing when the walk made one."""
    names = listings.get(os.fspath(directory)) if listings else None
    if names is not None:
        return marks_project_root(names)
    return is_project_root(directory)


class Projects:
    """The projects of one run: each file's project root, its settings and its index, each
    computed once."""

    def __init__(
        self,
        settings: Settings,
        *,
        use_cache: bool = True,
        jobs: int | None = None,
        build: bool = True,
        limits: AnalysisLimits = AnalysisLimits(),
        while_indexing: Callable[[Sequence[str]], None] | None = None,
    ) -> None:
        self.settings = settings
        self.while_indexing = while_indexing  # `build_index`'s `while_extracting`
        self.use_cache = use_cache
        self.jobs = jobs
        self.limits = limits
        self.build = build  # False when no selected rule reads the index
        self._roots: dict[str, Path] = {}  # absolute directory -> its project root
        # The files of the run: all that is indexed of a root without a marker (`ckptlint
        # ~/scratch.py`, or a run in a directory of no project): walking everything below
        # such a directory could mean the whole home directory.
        self.run_files: Sequence[tuple[str, str]] = ()  # (path, absolute path)
        self.listings: Mapping[str, frozenset[str]] = {}  # the run's directory listings
        self._indexes: dict[Path, ProjectIndex] = {}
        self._settings: dict[Path, Settings] = {}

    def root_of(self, path: Path | str) -> Path:
        """The nearest directory at or below the run's root that is a project root; for a
        file outside the run's root, its own nearest project root."""
        directory = os.path.dirname(absolute_text(path))
        found = self._roots.get(directory)
        if found is not None:
            return found
        outer = self.settings.project_root
        outer_text = str(outer)
        chain = []
        current = directory
        while True:
            chain.append(current)
            if current in self._roots:
                found = self._roots[current]
                break
            if current == outer_text:
                found = outer
                break
            if _has_marker(current, self.listings):
                found = Path(current)
                break
            parent = os.path.dirname(current)
            if parent == current:
                inside = directory.startswith(outer_text.rstrip(os.sep) + os.sep) or directory == outer_text
                found = outer if inside else Path(directory)
                break
            current = parent
        for item in chain:
            self._roots[item] = found
        return found

    def settings_for(self, root: Path) -> Settings:
        if root not in self._settings:
            self._settings[root] = self.settings.for_project(root)
        return self._settings[root]

    def nested_settings(self) -> list[Settings]:
        """The settings of the nested projects met so far, by root."""
        return [s for root, s in sorted(self._settings.items()) if root != self.settings.project_root]

    def index_for(self, root: Path) -> ProjectIndex:
        if root not in self._indexes:
            self._indexes[root] = (
                build_index(
                    root,
                    self.settings_for(root),
                    use_cache=self.use_cache,
                    jobs=self.jobs,
                    limits=self.limits,
                    files=None if _has_marker(root) else self._run_files_under(root),
                    while_extracting=self.while_indexing,
                )
                if self.build
                else ProjectIndex(root)
            )
        return self._indexes[root]

    def _run_files_under(self, root: Path) -> list[tuple[str, str]]:
        return [
            (path, absolute)
            for path, absolute in self.run_files
            if absolute.endswith((*INDEXED_SUFFIXES, *CONFIGURATION_SUFFIXES)) and self.root_of(absolute) == root
        ]

    def indexes(self) -> dict[Path, ProjectIndex]:
        return dict(self._indexes)


def project_files(root: Path, settings: Settings, cache_directory: Path | None = None) -> list[tuple[str, str]]:
    """Every Python file (and YAML configuration) of the project, with its absolute path: under its root, minus
    excludes and .gitignore'd files, minus nested projects. With a cache directory, the
    walk is remembered (`ckptlint.walk_cache`)."""
    found = discover_remembered(
        [root],
        cache_directory=cache_directory,
        purpose="index",
        project_root=root,
        exclude=settings.exclude,
        extend_exclude=settings.extend_exclude,
        respect_gitignore=settings.respect_gitignore,
        include=(*INDEXED_INCLUDE, *CONFIGURATION_INCLUDE),
    )
    nested: dict[str, bool] = {os.path.abspath(root): False}

    def inside_nested(directory: str) -> bool:
        chain = []
        while directory not in nested:
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            chain.append(directory)
            directory = parent
        result = nested.get(directory, False)
        for item in reversed(chain):  # outermost first: a marker above decides for all below
            result = result or _has_marker(item, found.listings)
            nested[item] = result
        return result

    return [
        (path, absolute)
        for path, absolute in zip(found.paths, found.absolute)
        if not inside_nested(os.path.dirname(absolute))
    ]


def _extract(item: tuple[str, str]) -> tuple[FileFacts, str, str, list[str]] | None:
    """The facts of one file, the digest of the bytes they were extracted from, their
    exported digest and their `cross_file_kinds` (computed here, in the worker, where the
    summaries are still decoded: the parent would decode them again, file after file)."""
    path, relative = item
    try:
        data = read_source_bytes(path)
    except OSError:
        return None
    if relative.endswith(CONFIGURATION_SUFFIXES):
        from ckptlint.model.file_facts.options import configuration_facts

        facts = configuration_facts(data.decode("utf-8", errors="replace"), relative, module_name(relative))
    else:
        from ckptlint.model.file_facts.extraction import extract_facts

        facts = extract_facts(indexed_text(data, relative), relative)
    return facts, content_digest(data), exported_digest(facts), cross_file_kinds(facts, relative)


def indexed_text(data: bytes, relative: str) -> str:
    """The Python a file holds: a notebook's code cells joined (none when it cannot be read
    as a notebook: its lint reports why)."""
    text = data.decode("utf-8", errors="replace")
    if not is_notebook_path(relative):
        return text
    try:
        return read_notebook(text).python_text
    except NotebookError:
        return ""


def build_index(
    root: Path,
    settings: Settings,
    *,
    use_cache: bool = True,
    jobs: int | None = None,
    files: Sequence[tuple[str, str]] | None = None,
    limits: AnalysisLimits = AnalysisLimits(),
    while_extracting: Callable[[Sequence[str]], None] | None = None,
) -> ProjectIndex:
    """The project's index, of `files` ((path, absolute path) pairs) or else of
    `project_files`. With the cache, a file whose stat (mtime, size, inode, ctime) is the one
    recorded with its digest is not read at all; one whose content digest is unchanged is not
    parsed; only the others are extracted, in worker processes under the per-file limits.
    A file over the size limit is not even read; one whose extraction stops at a limit has
    no facts (and is not tried again under the same limits). `while_extracting(paths)` runs
    here while the extraction workers are busy (`WorkerPool.while_busy`), with the paths of
    the files they extract."""
    trusted_before = time.time_ns() - RACY_WINDOW_NS
    cache = _IndexCache(settings, root) if use_cache else None
    stopped_under = limits.fingerprint()
    built: dict[str, FileFacts] = {}
    digests: dict[str, str] = {}
    exported: dict[str, str] = {}  # relative path -> what other files can observe of it
    stats: dict[str, list[int] | None] = {}
    empty: set[str] = set()  # files known to have no facts (nothing cached to read for them)
    kinds: dict[str, list[str]] = {}  # relative path -> its `cross_file_kinds`
    pending: list[tuple[str, str]] = []
    sizes: list[int] = []  # of the pending files
    paths: dict[str, str] = {}
    if files is None:
        files = project_files(root, settings, cache.directory if cache is not None else None)
    previous = cache.entries() if cache is not None else {}  # what the last run indexed

    def take_cached(relative: str, entry: dict) -> None:
        digests[relative], exported[relative], kinds[relative] = entry["digest"], entry["exported"], entry["kinds"]
        if entry.get("empty") is True:
            empty.add(relative)

    for path, absolute in files:
        relative = relative_to_root(absolute, root)
        paths[relative] = path
        try:
            status = os.stat(path)
        except OSError:
            continue
        if status.st_size > limits.bytes_for(path):
            continue  # generated code: never read (`check_file` says so when it matters)
        if cache is None:
            pending.append((path, relative))
            sizes.append(status.st_size)
            continue
        stats[relative] = stat_key(status) if status.st_mtime_ns < trusted_before else None
        entry = cache.entry(relative)
        if entry is None or entry.get("stopped", stopped_under) != stopped_under:
            pending.append((path, relative))  # never indexed (or under other limits): read once, by the extraction
            sizes.append(status.st_size)
            continue
        if stats[relative] is not None and entry["stat"] == stats[relative]:
            take_cached(relative, entry)  # unchanged since it was indexed: not even read
            continue
        try:
            digest = content_digest(read_source_bytes(path))
        except OSError:
            continue
        if entry["digest"] == digest:
            take_cached(relative, entry)  # same content (touched, copied, checked out again)
            cache.remember(relative, digest, exported[relative], stats[relative], relative in empty, kinds[relative], entry.get("stopped"))
            continue
        pending.append((path, relative))
        sizes.append(status.st_size)

    workers = workers_for(sizes, jobs, min_files=PARALLEL_EXTRACTION_THRESHOLD, min_bytes=PARALLEL_EXTRACTION_BYTES)
    extracted: list = []
    if pending:
        while_busy = None if while_extracting is None else functools.partial(while_extracting, [path for path, _ in pending])
        with WorkerPool(_extract, workers=workers, limits=limits.for_workers, while_busy=while_busy) as pool:
            extracted = pool.map(pending, weights=sizes)  # the largest files first: none left for last
    errors: list[str] = []
    for (path, relative), result in zip(pending, extracted):
        stopped = None
        if isinstance(result, TaskFailure) and result.kind == "error":
            # A bug of ours, not a limit: said, and tried again on the next run.
            last = result.detail.strip().splitlines()[-1] if result.detail.strip() else "unknown error"
            errors.append(f"{relative}: internal error while indexing, its facts are missing (please report): {last}")
            continue
        if isinstance(result, TaskFailure):
            # Past a limit: no facts (the lint of the file reports the limit). Its digest is
            # remembered so that a warm run under the same limits does not try again.
            try:
                empty_facts = FileFacts(module_name(relative))
                result = (
                    empty_facts, content_digest(read_source_bytes(path)), exported_digest(empty_facts),
                    cross_file_kinds(empty_facts, relative),
                )
            except OSError:
                continue
            stopped = stopped_under
        if result is None:
            continue
        built[relative], digests[relative], exported[relative], kinds[relative] = result
        if cache is not None:
            is_empty = built[relative] == FileFacts(built[relative].module)
            cache.remember(relative, digests[relative], exported[relative], stats.get(relative), is_empty, kinds[relative], stopped)
            if not is_empty:
                cache.store_facts(relative, digests[relative], built[relative])

    def load(relative: str) -> FileFacts:
        """Facts not built in this run: from the cache, else extracted again."""
        if relative in empty:
            return FileFacts(module_name(relative))
        facts = cache.facts(relative, digests[relative]) if cache is not None else None
        if facts is not None:
            return facts
        result = _extract((paths[relative], relative))
        return result[0] if result is not None else FileFacts(module_name(relative))

    # The fingerprint from each file's exported part: an unchanged project, or one whose
    # edits other files cannot observe, never builds the facts for it.
    files_with: dict[str, set[str]] = {}
    for relative, file_kinds in kinds.items():
        for kind in file_kinds:
            files_with.setdefault(kind, set()).add(relative)
    facts = LazyFacts(sorted(digests), built, load)
    index = ProjectIndex(
        root,
        facts,
        digests,
        fingerprint_of(exported.items()),
        {kind: frozenset(holders) for kind, holders in files_with.items()},
        tuple(errors),
        exported=exported,
        table_store=cache.tables() if cache is not None else None,
        read_log=ReadLog() if cache is not None else None,
    )
    if cache is not None:
        changed = _changed_keys(previous, digests, exported, kinds, facts, cache)
        index.revision = cache.advance(changed, index)
        cache.retain(digests)
        cache.save()
    return index


def _changed_keys(
    previous: Mapping[str, dict],
    digests: Mapping[str, str],
    exported: Mapping[str, str],
    kinds: Mapping[str, list[str]],
    facts: Mapping[str, FileFacts],
    cache: _IndexCache,
) -> set[str] | None:
    """The keys (`ckptlint.model.project.reads`) whose answer changed since the last run
    indexed the project: those the files added, removed or edited since contribute
    differently to. None when that cannot be told (the old facts of an edited file are
    gone): nothing read before can be trusted."""
    changed: set[str] = set()
    for relative in sorted(previous.keys() | digests.keys()):
        entry = previous.get(relative)
        old_digest = entry.get("digest") if isinstance(entry, dict) else None
        if old_digest == digests.get(relative) and old_digest is not None:
            continue
        old = new = None
        if isinstance(entry, dict):
            old_facts = _cached_facts(relative, entry, cache)
            if old_facts is None:
                return None
            if relative in digests and old_facts == facts[relative]:
                if entry.get("exported") == exported[relative] and entry.get("kinds") == kinds[relative]:
                    continue  # an edit that changed no fact (a comment, a line's spacing)
            old = contributions(relative, old_facts, entry.get("exported"), entry.get("kinds") or ())
        if relative in digests:
            new = contributions(relative, facts[relative], exported[relative], kinds[relative])
        changed |= changed_keys(old, new)
    # Whether some module has a component or prefix is all a `p:` / `mp:` key answers.
    existence = [key for key in changed if key.startswith(("p:", "mp:"))]
    if existence:
        def present(paths) -> set[str]:
            return {
                key for path in paths if not path.endswith(CONFIGURATION_SUFFIXES)
                for key in module_existence_keys(module_name(path))
            }

        before, after = present(previous), present(digests)
        changed.difference_update(key for key in existence if (key in before) == (key in after))
    # Likewise which files are scripts and which top-level folders there are.
    for key, of_paths in ((ALL_SCRIPTS, script_paths), (TOP_FOLDERS, top_folders)):
        if key in changed and of_paths(previous) == of_paths(digests):
            changed.discard(key)
    return changed


def _cached_facts(relative: str, entry: dict, cache: _IndexCache) -> FileFacts | None:
    if entry.get("empty") is True:
        return FileFacts(module_name(relative))
    digest = entry.get("digest")
    return cache.facts(relative, digest) if isinstance(digest, str) else None


@functools.lru_cache(maxsize=1)
def facts_format() -> str:
    """A digest of the model's modules (its subpackages', the readers of configuration files
    and launch scripts among them) and the recipe checks', among them those that define and
    extract the facts (read, not imported: a warm run needs no extraction). Every module
    counts, so a module the extraction starts to use can never be left out of it."""
    package = Path(__file__).parent
    digest = hashlib.blake2b(digest_size=8)
    for module in sorted((*package.joinpath("model").rglob("*.py"), *package.joinpath("recipes").glob("*.py"))):
        digest.update(module.read_bytes())
    return digest.hexdigest()


class _StoredTables:
    """`ckptlint.model.project.stored_tables`' store: one file per table (`<name>.table`, JSON, beside
    the facts files but not one of them), holding the key (the exported digests of the files
    it was computed from) with the value. Written atomically by whichever process computes
    it (a lint worker); a file for another key, or a damaged one, is as good as none."""

    def __init__(self, cache_directory: Path, directory: Path) -> None:
        self._cache_directory, self._directory = cache_directory, directory

    def load(self, name: str, key: str) -> object | None:
        try:
            data = json.loads((self._directory / f"{name}{TABLE_SUFFIX}").read_bytes())
        except (OSError, ValueError, RecursionError):
            return None
        return data.get("value") if isinstance(data, dict) and data.get("key") == key else None

    def store(self, name: str, key: str, value: object) -> None:
        save_cache_file(self._cache_directory, self._directory / f"{name}{TABLE_SUFFIX}", {"key": key, "value": value})


class _IndexCache:
    """Per project root: `index-<key>.json` holds each file's content digest, exported
    digest and stat (read on every run); `facts-<key>/` holds the facts of each file that
    has any, one small file per (path, content) pair, read only when a rule asks for them.
    Facts files are named by path and content digest, so concurrent runs never pair a
    digest with the facts of other content, and an edit rewrites one small file."""

    def __init__(self, settings: Settings, root: Path) -> None:
        # The facts' form changes with the code that extracts them: a cache written by
        # another form is another cache, never misread.
        key = hashlib.sha256(f"{root.absolute()}\0{facts_format()}".encode()).hexdigest()[:16]
        self.directory = settings.cache_directory  # settings of this project: its root is `root`
        self._index = CacheFile(self.directory, f"index-{key}.json")
        self._facts_directory = self._index.path.parent / f"{FACTS_PREFIX}{key}"
        self._stored_facts = False
        # The index's revision and when each key last changed (`ReadRevision`).
        self._revisions = CacheFile(self.directory, f"index-{key}.revisions.json")

    def entries(self) -> dict[str, dict]:
        """Every file's entry as the last run left it."""
        return {relative: entry for relative in self._index.keys() if (entry := self.entry(relative)) is not None}

    def advance(self, changed: set[str] | None, index: ProjectIndex) -> ReadRevision:
        """The revision after this run's changes (`changed`: the keys whose answer changed,
        None for every key; with the `q:` keys of the index's cut-off tables whose answer
        changed), recorded for the next run."""
        state = self._revisions.entry("state") or {}
        epoch, number, floor, keys = state.get("epoch"), state.get("revision"), state.get("floor"), state.get("changed")
        if not (isinstance(epoch, str) and type(number) is int and type(floor) is int and isinstance(keys, dict)):
            epoch, number, floor, keys = os.urandom(8).hex(), 0, 0, {}
            changed = None
        previous_tables = state.get("tables") if isinstance(state.get("tables"), dict) else {}
        answers, tables = cutoff_changes(index, changed, previous_tables)
        if changed is not None:
            changed |= answers
        if tables != previous_tables:
            self._revisions.set_entry("state", {**state, "tables": tables})
        if changed is None or changed:
            number += 1
            if changed is None or len(keys) + len(changed) > _MAX_CHANGED_KEYS:
                floor, keys = number, {}
            else:
                keys = {**keys, **dict.fromkeys(changed, number)}
            self._revisions.set_entry(
                "state", {"epoch": epoch, "revision": number, "floor": floor, "changed": keys, "tables": tables}
            )
        return ReadRevision(epoch, number, floor, keys)

    def entry(self, relative: str) -> dict | None:
        """The cached digest, exported digest and stat of a file, when well-formed."""
        entry = self._index.entry(relative)
        if (
            entry is None
            or not isinstance(entry.get("digest"), str)
            or not isinstance(entry.get("exported"), str)
            or not (entry.get("stat") is None or isinstance(entry.get("stat"), list))
            or not isinstance(entry.get("kinds"), list)
            or not all(isinstance(kind, str) for kind in entry["kinds"])
        ):
            return None
        return entry

    def remember(
        self,
        relative: str,
        digest: str,
        exported: str,
        stat: list[int] | None,
        empty: bool,
        kinds: list[str],
        stopped: str | None = None,
    ) -> None:
        """`empty`: the file has no facts (none are stored for it); `kinds`: its
        `cross_file_kinds`; `stopped`: the limits its extraction stopped at, if it did."""
        entry = {"digest": digest, "exported": exported, "stat": stat, "empty": empty, "kinds": kinds}
        if stopped is not None:
            entry["stopped"] = stopped
        self._index.set_entry(relative, entry)

    @staticmethod
    def _facts_name(relative: str, digest: str) -> str:
        return hashlib.blake2b(f"{relative}\0{digest}".encode(), digest_size=16).hexdigest() + ".json"

    def _facts_path(self, relative: str, digest: str) -> Path:
        return self._facts_directory / self._facts_name(relative, digest)

    def store_facts(self, relative: str, digest: str, facts: FileFacts) -> None:
        path = self._facts_path(relative, digest)
        if save_cache_file(self.directory, path, {"digest": digest, "facts": facts.to_json()}) is None:
            self._stored_facts = True

    def facts(self, relative: str, digest: str) -> FileFacts | None:
        """The cached facts of a file with this digest; None when absent or corrupt."""
        try:
            data = json.loads(self._facts_path(relative, digest).read_bytes())
            if data["digest"] != digest:
                return None
            return FileFacts.from_json(data["facts"])
        except (OSError, KeyError, IndexError, TypeError, ValueError, AttributeError, RecursionError):
            return None

    def tables(self) -> _StoredTables:
        return _StoredTables(self.directory, self._facts_directory)

    def retain(self, digests: Mapping[str, str]) -> None:
        """Forget files no longer in the project; after new facts were stored, delete the
        facts files of content no longer there."""
        self._index.retain(set(digests))
        if not self._stored_facts:
            return
        live = {self._facts_name(relative, digest) for relative, digest in digests.items()}
        try:
            names = os.listdir(self._facts_directory)
        except OSError:
            return
        for name in names:
            if name not in live and name.endswith(".json"):
                with contextlib.suppress(OSError):
                    os.unlink(self._facts_directory / name)

    def save(self) -> str | None:
        warnings = [self._index.save(), self._revisions.save()]
        return next((warning for warning in warnings if warning), None)
