"""A persistent cache of lint results, keyed by file content and everything else that can
change a result: ckptlint's version, the enabled rules, per-file ignores and the target
versions. A stale entry is never used; a corrupt or unreadable cache is ignored and rebuilt.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from stat import S_ISREG

from ckptlint import __version__
from ckptlint.config import Settings
from ckptlint.discovery import stat_key
from ckptlint.source import content_digest, read_source_bytes
from ckptlint.types import Applicability, Diagnostic, Edit, Fix, Location, Severity, rule_docs_url
from ckptlint.writer import interrupts_deferred

# The project index keeps each file's facts in a file of its own under `facts-<project key>/`.
FACTS_PREFIX = "facts-"
# The project-wide tables kept beside the facts files (`ckptlint.indexing._StoredTables`).
TABLE_SUFFIX = ".table"
CACHE_README = "This directory is ckptlint's cache; it is safe to delete (`ckptlint clean`).\n"


def settings_fingerprint(settings: Settings) -> str:
    parts = [
        __version__,
        ",".join(sorted(settings.enabled_codes)),
        repr(settings.per_file_ignores),
        settings.target_versions.fingerprint(),
        repr(settings.stateful_modules),
        repr(settings.checkpoint_functions),
        settings.fsdp,
        rule_docs_url("{code}"),  # findings are cached with their rule's URL
    ]
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]


class CacheFile:
    """One JSON file of entries by key under the cache directory's version directory: read
    whole (anything unreadable or malformed counts as empty), written whole and atomically."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.path = directory / __version__ / name
        self._entries: dict[str, dict] = {}
        self._dirty = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if isinstance(data, dict) and isinstance(data.get("files"), dict):
                self._entries = data["files"]
        except (OSError, ValueError, RecursionError):
            self._entries = {}

    def mark_dirty(self) -> None:
        self._dirty = True

    def keys(self) -> list[str]:
        return list(self._entries)

    def entry(self, key: str) -> dict | None:
        found = self._entries.get(key)
        return found if isinstance(found, dict) else None

    def set_entry(self, key: str, value: dict) -> None:
        self._entries[key] = value
        self._dirty = True

    def retain(self, keys: set[str]) -> None:
        """Forget every entry not in `keys`."""
        if not keys.issuperset(self._entries):
            self._entries = {k: v for k, v in self._entries.items() if k in keys}
            self._dirty = True

    def save(self) -> str | None:
        """Write atomically; concurrent runs each write a whole file and the last one wins.
        Returns a warning when the cache cannot be written."""
        if self._dirty:
            return save_cache_file(self.directory, self.path, {"version": __version__, "files": self._entries})
        return None


class ResultCache(CacheFile):
    """Each file's diagnostics under the key they were computed for (its content digest
    and everything else they depend on), with the stat of the file when it was trusted (a
    warm run then does not read it), and the other files the result rests on (a launch
    script's configs), each with its digest and stat."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.cache_directory, f"{settings_fingerprint(settings)}.json")

    def recorded_content(self, path: str, stat: list[int] | None) -> str | None:
        """The content digest recorded for `path`, when `stat` (trusted) is the one recorded
        with it: the file has not changed, and need not be read."""
        entry = self._entries.get(path)
        if stat is None or not isinstance(entry, dict) or entry.get("stat") != stat:
            return None
        content = entry.get("content")
        return content if isinstance(content, str) else None

    def get(
        self, path: str, key: str, trusted_before: int, reads_unchanged: Callable[[object, object], bool] | None = None
    ) -> tuple[tuple[Diagnostic, ...], tuple[str, ...]] | None:
        """The cached findings of a file, and why its versions hide others (`FileResult.hidden`).
        With `reads_unchanged` (`ReadRevision.unchanged_since`), only while the keys of the
        project index its analysis read answer as they did (`put`'s `reads`)."""
        entry = self._entries.get(path)
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        if reads_unchanged is not None and not reads_unchanged(entry.get("revision"), entry.get("reads")):
            return None
        try:
            if not all(_input_unchanged(item, trusted_before) for item in entry.get("inputs", ())):
                return None
            hidden = tuple(entry.get("hidden", ()))
            if not all(isinstance(why, str) for why in hidden):
                return None
            return tuple(_diagnostic_from_json(item) for item in entry["diagnostics"]), hidden
        except (KeyError, TypeError, ValueError, AttributeError):
            return None  # a corrupt entry: lint the file again

    def put(
        self,
        path: str,
        key: str,
        diagnostics: tuple[Diagnostic, ...],
        *,
        content: str,
        stat: list[int] | None,
        inputs: tuple[tuple[str, str | None], ...],
        trusted_before: int,
        hidden: tuple[str, ...] = (),
        reads: tuple[str, tuple[str, ...]] | None = None,
    ) -> None:
        """`reads`: the index revision the result was computed at and the keys it read."""
        self._entries[path] = {
            "key": key,
            "content": content,
            "stat": stat,
            "inputs": [[name, digest, _trusted_stat(name, trusted_before)] for name, digest in inputs],
            "diagnostics": [asdict(d) for d in diagnostics],
            "hidden": list(hidden),
        }
        if reads is not None:
            self._entries[path]["revision"], self._entries[path]["reads"] = reads[0], list(reads[1])
        self._dirty = True


def trusted_stat(status: os.stat_result, trusted_before: int) -> list[int] | None:
    """A stat that can tell later whether the file changed: None for a file modified so
    recently that another change within the same timestamp tick would go unseen (git's
    racily-clean rule)."""
    return stat_key(status) if status.st_mtime_ns < trusted_before else None


def _trusted_stat(path: str, trusted_before: int) -> list[int] | None:
    try:
        return trusted_stat(os.stat(path), trusted_before)
    except OSError:
        return None


def _input_unchanged(item: list, trusted_before: int) -> bool:
    """Whether one recorded input is still what it was: still absent, the same stat, or
    else the same content."""
    path, digest, stat = item
    try:
        status = os.stat(path)
        exists = S_ISREG(status.st_mode)
    except OSError:
        exists = False
    if digest is None or not exists:
        return digest is None and not exists
    if stat is not None and trusted_stat(status, trusted_before) == stat:
        return True
    try:
        return content_digest(read_source_bytes(path)) == digest
    except OSError:
        return False


def save_cache_file(directory: Path, path: Path, payload: dict) -> str | None:
    """Write one cache file atomically under `directory`. A read-only checkout still lints,
    it just is not cached: the problem comes back as a warning."""
    try:
        # Mark the directory as ours only when we create it: a configured cache-dir that
        # already holds files keeps its own README and .gitignore.
        created = not directory.exists()
        path.parent.mkdir(parents=True, exist_ok=True)
        if created:
            (directory / "README").write_text(CACHE_README)
            (directory / ".gitignore").write_text("*\n")
        with interrupts_deferred():  # a temporary file is never left behind
            descriptor, temporary = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            try:
                with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
                    # `dumps` then one write: `json.dump` to a stream takes the pure-Python
                    # encoder (8x slower on a 15 MB index).
                    handle.write(json.dumps(payload, separators=(",", ":")))
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
    except OSError as error:
        return f"cache not written ({directory}): {error.strerror or error}; results are not cached"
    return None


def _diagnostic_from_json(item: dict) -> Diagnostic:
    fix = item.get("fix")
    texts = [item["code"], item["message"], item["path"]]
    if fix is not None:
        texts += [fix["message"], *(e["content"] for e in fix["edits"])]
    if not all(isinstance(text, str) for text in texts):
        raise TypeError("a cached diagnostic holds a value of the wrong type")
    return Diagnostic(
        code=item["code"],
        message=item["message"],
        path=item["path"],
        location=_location(item["location"]),
        end_location=_location(item["end_location"]),
        fix=None
        if fix is None
        else Fix(
            applicability=Applicability(fix["applicability"]),
            message=fix["message"],
            edits=tuple(
                Edit(_location(e["location"]), _location(e["end_location"]), e["content"]) for e in fix["edits"]
            ),
        ),
        noqa_row=item.get("noqa_row"),
        url=item.get("url"),
        cell=_cell(item.get("cell")),
        # An entry written before findings had severities has none: linted again.
        severity=Severity(item["severity"]),
    )


def _cell(value) -> int | None:
    if value is not None and not (type(value) is int and value >= 1):
        raise ValueError(f"not a cell number: {value!r}")
    return value


def _location(item: dict) -> Location:
    row, column = item["row"], item["column"]
    if not all(type(value) is int and value >= 1 for value in (row, column)):
        raise ValueError(f"not a location: {item!r}")
    return Location(row, column)


def clear_cache(directory: Path) -> list[Path]:
    """Remove what ckptlint wrote under `directory` (version directories of result files,
    its README and .gitignore), never anything else a configured cache-dir may hold."""
    removed: list[Path] = []
    if not directory.is_dir():
        return removed
    for child in sorted(directory.iterdir()):
        if child.is_dir() and not child.is_symlink() and _is_result_directory(child):
            for item in child.iterdir():
                if item.is_dir():
                    for fact in item.iterdir():
                        fact.unlink()
                    item.rmdir()
                else:
                    item.unlink()
            child.rmdir()
            removed.append(child)
    for name, content in (("README", CACHE_README), (".gitignore", "*\n")):
        marker = directory / name
        try:
            if marker.is_file() and marker.read_text(encoding="utf-8") == content:
                marker.unlink()
                removed.append(marker)
        except OSError:
            pass
    with contextlib.suppress(OSError):
        directory.rmdir()  # only when nothing else is left in it
        removed.append(directory)
    return removed


def _is_result_directory(path: Path) -> bool:
    """A directory named like a ckptlint version holding only result files (and the
    project index's facts directories of them)."""
    if not path.name[:1].isdigit():
        return False
    return all(
        _is_cache_file(item)
        or (item.is_dir() and not item.is_symlink() and item.name.startswith(FACTS_PREFIX)
            and all(_is_cache_file(fact) for fact in item.iterdir()))
        for item in path.iterdir()
    )


def _is_cache_file(path: Path) -> bool:
    return path.is_file() and path.suffix in (".json", ".tmp", TABLE_SUFFIX)
