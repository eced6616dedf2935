"""What one file's analysis read of the project index, as keys, and which keys an edit of a
file changes: the fine-grained dependencies of a cached result (the shape of rust-analyzer's
Salsa queries and mypy's fine-grained daemon).

Every question the index answers from other files' facts goes through a *keyed read*: the
facts of one file (`f:<path>`), one entry of a project-wide table (`c:<class>`, its name and bases alone `cb:<class>`,
`fn:<function>`, `m:<module>`, `mp:<module or package prefix>`, `s:<last name>`, `n:<absolute name>`...), the files holding a
kind of cross-file fact (`k:<kind>`) or their facts (`kf:<kind>`), the modules a file star-
imports (`*:<path>`), the names a file's imports and definitions refer to (`nm:<path>`), or a whole table iterated (`A`, `C`, `F`, `B`, `P`; `S` and `T`, the scripts and the top-level folders). The value each
key has is made of per-file *contributions* (`contributions`): a key's answer changes only
when some file's contribution to it does, so an edit of one file changes exactly the keys
whose contribution differs between its old and new facts (`changed_keys`), and a cached
result stays valid while none of the keys it read changed.

`ReadLog` records the keys (one per index and its overlays, started per linted file).
Derived tables the index keeps across files (`tracked_cached_property`) record the keys
they were computed from and replay them to every later reader, so a table built while
linting one file still counts as a read of the next file that uses it; the objects that
memoise as they go (the evaluator, the call graph) are made afresh for each file instead
(`ProjectFacts.begin_reads`).

Reads of a file's facts as a whole (`f:`, `A`, `kf:`) are keyed by the file's
`exported_digest`, as the whole-project fingerprint was: what other files can observe.
Table entries are keyed by the entries themselves (lines included)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from typing import Any

# Keys of whole tables, read by iterating them: every file contributes to them.
ALL_FACTS = "A"  # every file's facts (exported part)
ALL_PATHS = "P"  # which files (and modules) the project holds
ALL_CLASSES = "C"  # every class
ALL_FUNCTIONS = "F"  # every function
ALL_BASES = "B"  # every class's name and bases
ALL_NAMES = "N"  # every file's imports and definitions (the call graph's names table)
# Which files are scripts (`project_paths.script_paths`), which top-level folders there are: every
# file contributes, and only a change of the set itself changes the key (`ckptlint.indexing`).
ALL_SCRIPTS = "S"
TOP_FOLDERS = "T"
GLOBAL_KEYS = (ALL_FACTS, ALL_PATHS, ALL_CLASSES, ALL_FUNCTIONS, ALL_BASES, ALL_NAMES, ALL_SCRIPTS, TOP_FOLDERS)


class ReadLog:
    """The keys read while a file is analysed, and the frames of tracked tables being
    computed (each collects the keys its computation reads, then hands them to the frame
    below). Outside a file's analysis only the tables' frames record."""

    def __init__(self) -> None:
        self._frames: list[set[str]] = []

    def record(self, key: str) -> None:
        if self._frames:
            self._frames[-1].add(key)

    def record_all(self, keys: Iterable[str]) -> None:
        if self._frames:
            self._frames[-1].update(keys)

    def push(self) -> None:
        self._frames.append(set())

    def pop(self, *, merge: bool = True) -> frozenset[str]:
        keys = self._frames.pop()
        if self._frames and merge:
            self._frames[-1].update(keys)
        return frozenset(keys)

    def start(self) -> None:
        """Begin a file's analysis (any frame left by an interrupted one is dropped)."""
        self._frames = [set()]

    def stop(self) -> tuple[str, ...]:
        """End it: the keys it read, sorted."""
        keys = self._frames[0] if self._frames else set()
        self._frames = []
        return tuple(sorted(keys))


class tracked_cached_property:
    """`functools.cached_property` for a table derived from the index: computed once per
    index in a frame of the index's `read_log`, the keys it read kept with the value and
    recorded again on every access.

    With `cutoff`, a reader records the table's own key `q:<name>` instead: the index
    compares the table's answer with the last run's whenever one of the keys it was
    computed from changed (`cutoff_changes`), and `q:<name>` changes only when the answer
    does (Salsa's early cutoff). For the tables every linted file asks for (the names of
    the project's forwarding and FSDP-wrapping helpers): an edit of a file holding FSDP
    code that leaves them as they were re-lints nothing else."""

    def __init__(self, function=None, *, cutoff: bool = False) -> None:
        self.function = function
        self.cutoff = cutoff
        self.__doc__ = getattr(function, "__doc__", None)

    def __call__(self, function):  # `@tracked_cached_property(cutoff=True)`
        self.function = function
        self.__doc__ = function.__doc__
        return self

    def __set_name__(self, owner, name: str) -> None:
        self.name = name
        self.slot = f"_tracked_{name}"

    def computed(self, instance) -> tuple[object, frozenset[str]]:
        """The value and the keys it was computed from (computing it if need be)."""
        self.__get__(instance)
        return instance.__dict__[self.slot]

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        log: ReadLog | None = instance.read_log
        found = instance.__dict__.get(self.slot)
        if found is None and log is not None:
            # An overlay's table that the overlaid edit leaves as it was: the base's.
            found = instance.inherited_table(self)
            if found is not None:
                instance.__dict__[self.slot] = found
        if found is None:
            if log is None:
                value, keys = self.function(instance), frozenset()
            else:
                log.push()
                try:
                    value = self.function(instance)
                finally:
                    keys = log.pop(merge=not self.cutoff)
            found = instance.__dict__[self.slot] = (value, keys)
            if self.cutoff and log is not None:
                log.record(f"q:{self.name}")
        elif log is not None:
            if self.cutoff:
                log.record(f"q:{self.name}")
            else:
                log.record_all(found[1])
        return found[0]


@cache
def derived_tables(owner: type) -> dict[str, tracked_cached_property]:
    """The derived tables (`tracked_cached_property`) of a class and its bases, by name."""
    return {
        name: value for klass in reversed(owner.__mro__) for name, value in vars(klass).items()
        if isinstance(value, tracked_cached_property)
    }


class RecordingMapping(Mapping):
    """A mapping whose lookups record `<prefix><key>` and whose iteration records `whole`."""

    def __init__(self, items: Mapping, log: ReadLog | None, prefix: str, whole: str) -> None:
        self._items, self._log, self._prefix, self._whole = items, log, prefix, whole

    def __getitem__(self, key):
        if self._log is not None:
            self._log.record(f"{self._prefix}{key}")
        return self._items[key]

    def get(self, key, default=None):
        if self._log is not None:
            self._log.record(f"{self._prefix}{key}")
        return self._items.get(key, default)

    def __contains__(self, key: object) -> bool:
        if self._log is not None:
            self._log.record(f"{self._prefix}{key}")
        return key in self._items

    def __iter__(self) -> Iterator:
        if self._log is not None:
            self._log.record(self._whole)
        return iter(self._items)

    def __len__(self) -> int:
        if self._log is not None:
            self._log.record(self._whole)
        return len(self._items)

    def __reduce__(self):
        return (dict, (dict(self._items.items()),))


class RecordingFacts(RecordingMapping):
    """A project's facts by path: one file's facts read is `f:<path>`; whether a file is
    there, `h:<path>`; which files there are (iterating the paths), `P`; every file's
    facts (`values()`, `items()`), `A`."""

    def __init__(self, files: Mapping, log: ReadLog | None) -> None:
        super().__init__(files, log, "f:", ALL_PATHS)

    def values(self):
        if self._log is not None:
            self._log.record(ALL_FACTS)
        return self._items.values()

    def items(self):
        if self._log is not None:
            self._log.record(ALL_FACTS)
        return self._items.items()

    def __contains__(self, key: object) -> bool:
        if self._log is not None:
            self._log.record(f"h:{key}")
        return key in self._items

    @property
    def raw(self) -> Mapping:
        return self._items

    def __getattr__(self, name: str):
        """What else the mapping it wraps offers (`LazyFacts`' `_built`, for the tests)."""
        if name.startswith("__") or name == "_items":
            raise AttributeError(name)
        return getattr(self._items, name)


def _digest(value: Any) -> str:
    return hashlib.blake2b(repr(value).encode(), digest_size=10).hexdigest()


def _canonical(value: Any) -> Any:
    """A value with its sets and mappings in a fixed order (a set's order changes with the
    process's string hashing)."""
    if isinstance(value, (set, frozenset)):
        return ("set", sorted((_canonical(v) for v in value), key=repr))
    if isinstance(value, Mapping):
        return ("map", sorted(((_canonical(k), _canonical(v)) for k, v in value.items()), key=repr))
    if isinstance(value, (list, tuple)):
        return tuple(_canonical(v) for v in value)
    return value


def cutoff_changes(index, changed: set[str] | None, previous: Mapping[str, Any]) -> tuple[set[str], dict[str, Any]]:
    """The `q:<table>` keys whose answer changed (`tracked_cached_property(cutoff=True)`),
    and what to remember of each table for the next run. `previous`: the last run's
    (table -> {"digest", "inputs"}); a table is computed again only where it was never
    computed or one of its inputs changed (`changed`, None for every key, or the `q:` key
    of another such table it reads)."""
    tables = {name: table for name, table in derived_tables(type(index)).items() if table.cutoff}
    found: set[str] = set()
    remembered: dict[str, Any] = {}
    pending = dict(tables)
    while pending:
        progressed = False
        for name, table in list(pending.items()):
            before = previous.get(name)
            valid = (
                isinstance(before, dict) and isinstance(before.get("digest"), str) and isinstance(before.get("inputs"), list)
            )
            if valid and changed is not None and not (changed | found).intersection(before["inputs"]):
                if any(f"q:{other}" in before["inputs"] for other in pending if other != name):
                    continue  # decided once the tables it reads are
                remembered[name] = before
            else:
                value, inputs = table.computed(index)
                digest = _digest(_canonical(value))
                remembered[name] = {"digest": digest, "inputs": sorted(inputs)}
                if not valid or before["digest"] != digest:
                    found.add(f"q:{name}")
            del pending[name]
            progressed = True
        if not progressed:  # tables reading each other: computed
            changed = None
    return found, remembered


def contributions(path: str, facts, exported: str, kinds: Iterable[str]) -> dict[str, str]:
    """What one file contributes to each key (`facts` a `FileFacts`, `exported` its
    `exported_digest`, `kinds` its `cross_file_kinds`); a key it does not contribute to is
    absent."""
    from ckptlint.model.syntax.file_kinds import CONFIGURATION_SUFFIXES
    from ckptlint.model.syntax.names import module_name

    found: dict[str, str] = {f"f:{path}": exported, f"h:{path}": "1", ALL_FACTS: exported}
    parts: dict[str, list] = {}

    def add(key: str, value) -> None:
        parts.setdefault(key, []).append(value)

    add(ALL_SCRIPTS, path)
    add(TOP_FOLDERS, path)
    if not path.endswith(CONFIGURATION_SUFFIXES):
        module = module_name(path)
        add(f"m:{module}", path)
        add(ALL_PATHS, path)
        for key in module_existence_keys(module):
            add(key, 1)
    else:
        add(ALL_PATHS, path)
    for cls in facts.classes:
        add(f"c:{cls.name}", cls)
        add(ALL_CLASSES, cls)
        add(ALL_BASES, (cls.name, cls.bases))
        add(f"cb:{cls.name}", (cls.name, cls.bases))
        add(f"s:{cls.name.rpartition('.')[2]}", cls.name)
    for function in facts.functions:
        add(f"fn:{function.name}", function)
        add(ALL_FUNCTIONS, function)
        add(f"s:{function.name.rpartition('.')[2]}", function.name)
    for fact in facts.forwarding:
        add(f"fw:{fact.name}", fact)
    for summary in facts.summaries:
        add(f"u:{summary.name}", summary)
    if facts.star_imports:
        found[f"*:{path}"] = _digest(facts.star_imports)
    for local, absolute in facts.names:
        add(f"nm:{path}", absolute)
        add(f"i:{path}:{local}", absolute)
        add(f"n:{absolute}", path)
        add(ALL_NAMES, (local, absolute))
        if path.endswith("__init__.py") and absolute != f"{facts.module}.{local}":
            add(f"a:{absolute}", (facts.module, local))
    for kind in kinds:
        found[f"k:{kind}"] = "1"
        found[f"kf:{kind}"] = exported
    found.update((key, _digest(values)) for key, values in parts.items())
    return found


def module_existence_keys(module: str) -> set[str]:
    """The keys a module answers yes to by being there: each of its name's components
    (`p:`) and prefixes (`mp:`). Only a component or prefix that appears or disappears in the
    project changes such a key (`ckptlint.indexing`)."""
    components = module.split(".")
    return {f"p:{component}" for component in components} | {
        f"mp:{'.'.join(components[:end])}" for end in range(1, len(components) + 1)
    }


def changed_keys(old: Mapping[str, str] | None, new: Mapping[str, str] | None) -> set[str]:
    """The keys whose answer an edit changes: those one file's contribution differs on
    (`old` / `new` from `contributions`; None where the file is absent)."""
    old, new = old or {}, new or {}
    return {key for key in old.keys() | new.keys() if old.get(key) != new.get(key)}


class ReadRevision:
    """When each key last changed, as the index cache remembers it: the index's revision
    goes up by one on every run that changes some key (`changed`: key -> the revision it
    last changed at); `floor` is the revision before which nothing can be trusted (an edit
    whose old facts were lost). A result computed at revision `r` (`stamp`) is still valid
    while every key it read last changed at `r` or before."""

    def __init__(self, epoch: str, number: int, floor: int, changed: Mapping[str, int]) -> None:
        self.epoch, self.number, self.floor, self.changed = epoch, number, floor, changed

    @property
    def stamp(self) -> str:
        return f"{self.epoch}:{self.number}"

    def unchanged_since(self, stamp: object, keys: object) -> bool:
        """Whether the keys a result read (at revision `stamp`) answer as they did then."""
        if not isinstance(stamp, str) or not isinstance(keys, list):
            return False
        epoch, _, number = stamp.rpartition(":")
        if epoch != self.epoch or not number.isdigit():
            return False
        revision = int(number)
        if revision < self.floor or revision > self.number:
            return False
        changed = self.changed
        return all(changed.get(key, -1) <= revision for key in keys)
