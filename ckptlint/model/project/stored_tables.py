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
