"""Project-wide tables kept between runs: computed from the facts of the files of some
kinds only, stored in the index cache keyed by those files' exported digests, and read back
while those files' exported parts are unchanged (`ProjectIndex.table_store`, written by
`ckptlint.indexing`). A one-file run after an edit then reads one small file instead of the
facts of every file of those kinds (hundreds in transformers)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

T = TypeVar("T")


class TableStore(Protocol):
    """Where `stored_table` keeps tables between runs (`ckptlint.indexing`: the index cache)."""

    def load(self, name: str, key: str) -> object | None:
        """The JSON value stored under `name` for `key`; None when there is none."""

    def store(self, name: str, key: str, value: object) -> None:
        """Keep a JSON value under `name` for `key` (replacing any other key's)."""


@dataclass(frozen=True)
class TableCodec(Generic[T]):
    """How a table is written as JSON and read back."""

    encode: Callable[[T], object]
    decode: Callable[[object], T]


def stored_table(
    store: TableStore | None,
    exported: Mapping[str, str] | None,
    name: str,
    paths: Iterable[str],
    compute: Callable[[], T],
    codec: TableCodec[T],
) -> T:
    """A project-wide table that `compute` builds from the files `paths` only: taken from
    `store` when those files' exported parts (`exported`: each file's exported digest, as
    the index has them) are what it was built from, else built and stored."""
    paths = sorted(set(paths))
    if store is None or exported is None or any(path not in exported for path in paths):
        return compute()
    from ckptlint.model.file_facts.fingerprints import fingerprint_of

    key = fingerprint_of((path, exported[path]) for path in paths)
    stored = store.load(name, key)
    if stored is not None:
        try:
            return codec.decode(stored)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            pass  # written by other code, or damaged: computed again
    table = compute()
    store.store(name, key, codec.encode(table))
    return table


def stored_by_path(
    store: TableStore | None,
    exported: Mapping[str, str] | None,
    name: str,
    paths: Iterable[str],
    contribution: Callable[[str], T],
    codec: TableCodec[T],
) -> dict[str, T]:
    """Each file's part of a project-wide table (`contribution(path)`, computed from that
    file's facts only), kept between runs file by file: a file's part is computed again only
    when its exported digest changed, so a table over every file of the project costs one
    read and the facts of the files edited since, not the facts of every file."""
    paths = sorted(set(paths))
    if store is None or exported is None or any(path not in exported for path in paths):
        return {path: contribution(path) for path in paths}
    stored = store.load(name, _BY_PATH_KEY)
    kept: dict[str, T] = {}
    if isinstance(stored, dict):
        for path in paths:
            entry = stored.get(path)
            if isinstance(entry, list) and len(entry) == 2 and entry[0] == exported[path]:
                try:
                    kept[path] = codec.decode(entry[1])
                except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                    pass  # written by other code, or damaged: computed again
    parts = {path: kept[path] if path in kept else contribution(path) for path in paths}
    if len(kept) != len(paths) or not isinstance(stored, dict) or len(stored) != len(paths):
        store.store(name, _BY_PATH_KEY, {path: [exported[path], codec.encode(part)] for path, part in parts.items()})
    return parts


# The key `stored_by_path` tables are stored under: each entry carries its own digest.
_BY_PATH_KEY = "by-path"
