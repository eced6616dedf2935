"""Every file's facts of a project (cached by content, loaded lazily) and the lookups over
them: where a name is defined (through a package `__init__`'s re-exports too), a class's
bases and methods, the files holding each kind of cross-file fact, and the project-wide
tables read straight from the facts (wrapped classes, registries, option defaults,
checkpointing helpers, BatchNorm freezers). The call graph (`ckptlint.model.project.call_sites`),
the reach of FSDP uses (`ckptlint.model.project.scripts`) and the evaluator
(`ckptlint.model.evaluation.denotation`) are built on these; `ckptlint.model.index.ProjectIndex` adds
them and is what rules ask."""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from ckptlint.model.file_facts.facts import (
    DEFAULT_KWARGS,
    ClassFacts,
    EventKind,
    FileFacts,
    FunctionFacts,
    MethodFacts,
    OptionDefault,
    WrappedClass,
)
from ckptlint.model.syntax.file_kinds import CONFIGURATION_SUFFIXES
from ckptlint.model.library.combined import TRAINING_ARGUMENTS_CLASSES
from ckptlint.model.syntax.names import module_name
from ckptlint.model.syntax.project_paths import script_paths, top_folders
from ckptlint.model.project.norm_freezing_queries import NormFreezingQueries
from ckptlint.model.file_facts.registries import registered_classes
from ckptlint.model.form.summary import FunctionSummary
from ckptlint.model.project.reads import (
    ALL_BASES, ALL_FACTS, ALL_NAMES, ALL_PATHS, ALL_SCRIPTS, TOP_FOLDERS, ReadLog, ReadRevision, RecordingFacts,
    RecordingMapping, tracked_cached_property,
)

if TYPE_CHECKING:
    from ckptlint.model.project.stored_tables import TableStore

T = TypeVar("T")
WRAPS_KIND, CHECKPOINTING_KIND, OPTIONS_KIND = "wraps", "checkpointing", "options"
REGISTRY_KIND = "registries"
HF_CHECKPOINTING_KIND = "hf_checkpointing"  # files calling `gradient_checkpointing_enable`
RECOMPUTE_KIND = "recomputes"  # classes whose checkpointed regions read names or `self` (`recompute_reads`)


def checkpointing_functions(facts: FileFacts) -> list[FunctionFacts]:
    """The file's functions that run one of their parameters under torch's checkpoint."""
    return [
        f
        for f in facts.functions
        if any(e.kind is EventKind.RUNS_CHECKPOINTED and e.target in f.parameters for e in f.events)
    ]


class LazyFacts(Mapping):
    """Facts by relative path, each built on first use by `load` (from the cache, or
    extracted again): a run whose files are all unchanged never builds them."""

    def __init__(self, keys: Iterable[str], built: Mapping[str, FileFacts], load) -> None:
        self._built = dict(built)
        self._keys = sorted(set(keys) | set(self._built))
        self._known = frozenset(self._keys)
        self._load = load

    def __getitem__(self, key: str) -> FileFacts:
        found = self._built.get(key)
        if found is None:
            if key not in self._known:
                raise KeyError(key)
            found = self._built[key] = self._load(key)
        return found

    def __iter__(self):
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._known

    def __reduce__(self):
        # Sent to worker processes as plain facts (the loader is a closure).
        return (dict, (dict(self.items()),))


@dataclass
class ProjectFacts(NormFreezingQueries):
    root: Path
    files: Mapping[str, FileFacts] = field(default_factory=dict)  # relative path -> facts
    # relative path -> content digest of the text the facts were extracted from
    digests: dict[str, str] = field(default_factory=dict)
    # The fingerprint, when known without the facts (cached for exactly these digests).
    known_fingerprint: str | None = None
    # The files whose facts hold each kind of cross-file fact (`cross_file_kinds`), when
    # known without the facts: project-wide queries then load only those files.
    files_with: Mapping[str, frozenset[str]] | None = None
    # Files whose extraction raised (a bug of ours): they have no facts; the run says so.
    extraction_errors: tuple[str, ...] = ()
    # Each file's `exported_digest`, and where project-wide tables computed from the files
    # of some kinds are kept between runs (`ckptlint.model.project.stored_tables`), when cached.
    exported: Mapping[str, str] | None = field(default=None, repr=False, compare=False)
    table_store: TableStore | None = field(default=None, repr=False, compare=False)
    # Where the keys a file's analysis reads are recorded (`ckptlint.model.project.reads`);
    # None: nothing is recorded (and `files` is the mapping given).
    read_log: ReadLog | None = field(default=None, repr=False, compare=False)
    # When each key last changed (the index cache's), to tell whether a cached result's
    # reads still answer the same.
    revision: ReadRevision | None = field(default=None, repr=False, compare=False)
    # For an index made by `ProjectIndex.with_file`: the index it overlays and the path whose
    # facts it replaces; the tables made file by file are the base's with that file's part
    # made again (`_per_path`).
    overlay_of: tuple[ProjectFacts, str] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.files, RecordingFacts):
            self.files = self.files.raw
        self._raw_files = self.files
        if self.read_log is not None:
            self.files = RecordingFacts(self.files, self.read_log)

    # The caches that memoise as they go (an entry computed for one file would be found by
    # the next without its reads): made afresh for each file whose reads are recorded.
    PER_FILE_CACHES = (
        "call_sites", "denotation", "_training_arguments_answers", "_script_reach",
        "_star_answers",
    )

    def begin_reads(self) -> None:
        """Start recording the reads of one file's analysis (`end_reads` hands them back)."""
        for name in self.PER_FILE_CACHES:
            self.__dict__.pop(name, None)
        if self.read_log is not None:
            self.read_log.start()

    def end_reads(self) -> tuple[str, ...] | None:
        return self.read_log.stop() if self.read_log is not None else None

    def _record(self, key: str) -> None:
        if self.read_log is not None:
            self.read_log.record(key)

    def _recording(self, table: Mapping, prefix: str, whole: str) -> Mapping:
        return table if self.read_log is None else RecordingMapping(table, self.read_log, prefix, whole)

    def _paths_of_kind(self, kind: str) -> frozenset[str]:
        """The files holding facts of a kind (every file when the kinds are not recorded)."""
        if self.files_with is None:
            self._record(ALL_PATHS)
            return frozenset(self._raw_files)
        self._record(f"k:{kind}")
        return self.files_with.get(kind, frozenset())

    @property
    def recomputing_paths(self) -> frozenset[str]:
        """The files with a class whose checkpointed regions read what a caller can change."""
        return self._paths_of_kind(RECOMPUTE_KIND)

    def _files_of_kind(self, kind: str) -> Iterable[tuple[str, FileFacts]]:
        if self.files_with is None:
            self._record(ALL_FACTS)
            return self._raw_files.items()
        self._record(f"kf:{kind}")
        files = self._raw_files
        return ((path, files[path]) for path in sorted(self.files_with.get(kind, ())) if path in files)

    # queries -----------------------------------------------------------------------------

    def option_defaults(self, name: str) -> tuple[tuple[str, OptionDefault], ...]:
        """Where the project declares a configuration option `name` (`use_reentrant`) with
        a default: (path, declaration) for every dataclass field, argparse argument, environment
        default and YAML key."""
        return tuple(
            (path, option) for path, facts in self._files_of_kind(OPTIONS_KIND) for option in facts.options
            if option.name == name
        )

    @tracked_cached_property(cutoff=True)
    def registries(self) -> dict[str, dict[str, tuple[str, ...]]]:
        """registry (absolute name of the dict or registry object) -> key -> the classes the
        project registers under it (`ckptlint.model.file_facts.registries`)."""
        holding = [facts for _, facts in self._files_of_kind(REGISTRY_KIND)]
        return registered_classes(
            {function: registry for facts in holding for function, registry in facts.registrars},
            [registration for facts in holding for registration in facts.registrations],
        )

    @cached_property
    def _class_table(self) -> Mapping[str, ClassFacts]:
        return DefinitionTable(self._raw_files, self._defined_names, "classes")

    @cached_property
    def _function_table(self) -> Mapping[str, FunctionFacts]:
        return DefinitionTable(self._raw_files, self._defined_names, "functions")

    @cached_property
    def _defined_names(self) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
        """Each file's class and function names, kept between runs file by file
        (`stored_by_path`): which names the project defines, and where, is known without
        loading the facts of every file."""
        from ckptlint.model.project.stored_tables import TableCodec, stored_by_path

        files = self._raw_files

        def defined(path: str) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[str, ...]]:
            return tuple((c.name, c.bases) for c in files[path].classes), tuple(f.name for f in files[path].functions)

        return self._per_path("_defined_names", defined) or stored_by_path(
            self.table_store, self.exported, "definitions", files, defined,
            TableCodec(lambda names: [[[c, list(b)] for c, b in names[0]], list(names[1])], _definitions_from_json),
        )

    def _per_path(self, name: str, contribution: Callable[[str], T]) -> dict[str, T] | None:
        """In an overlay (`overlay_of`), table `name` made file by file (`stored_by_path`, in
        the order of the paths): the base's (computed there once for every overlay made from
        it) with the overlaid file's part made again; None for an index that overlays none."""
        if self.overlay_of is None:
            return None
        base, path = self.overlay_of
        table = getattr(base, name)
        if path in table:
            patched = dict(table)
            patched[path] = contribution(path)
            return patched
        return dict(sorted({**table, path: contribution(path)}.items()))  # a new file, in its place

    @cached_property
    def _bases_by_class(self) -> dict[str, tuple[str, ...]]:
        """Every class's bases by its name, as `_class_table` holds them, without its facts."""
        found: dict[str, tuple[str, ...]] = {}
        for path in self._raw_files:
            for name, bases in self._defined_names[path][0]:
                found[name] = bases
        return found

    @cached_property
    def classes(self) -> Mapping[str, ClassFacts]:
        """Every class by name: a lookup reads `c:<name>`, a walk over them `C`."""
        return self._recording(self._class_table, "c:", "C")

    @cached_property
    def _class_bases(self) -> Mapping[str, ClassFacts]:
        """`classes` for a reader of names and bases only: a lookup reads `cb:<name>`, a walk `B`."""
        return self._recording(self._class_table, "cb:", ALL_BASES)

    @cached_property
    def functions(self) -> Mapping[str, FunctionFacts]:
        """Every function by name: a lookup reads `fn:<name>`, a walk over them `F`."""
        return self._recording(self._function_table, "fn:", "F")

    def star_imported(self, module: str, name: str, depth: int = 0) -> str | None:
        """The absolute name `name` has in `module` through the module's star imports of
        project modules (`from ..modules.attention import *`, and theirs): what the
        imported module binds it to, an import or a definition. None when none binds it, or
        for a private name (`__all__` is not read: a name it left out would not run)."""
        if name.startswith("_") or depth > 4:
            return None
        # A package's `__init__` star-imports its modules, and theirs (transformers' whole
        # tree): each (module, name, depth) is walked once per linted file.
        answers = self._star_answers
        key = (module, name, depth)
        if key not in answers:
            answers[key] = self._star_imported_uncached(module, name, depth)
        return answers[key]

    def _star_imported_uncached(self, module: str, name: str, depth: int) -> str | None:
        # What is read is which modules a file star-imports (`*:<path>`) and what each binds
        # `name` to (`i:<path>:<name>`), not their facts: a function added to a module a
        # package star-imports leaves the package's answers, and its cached result, as they were.
        path = self.module_paths.get(module)
        facts = self._raw_files.get(path) if path is not None else None
        if facts is None:
            return None
        self._record(f"*:{path}")
        for star in facts.star_imports:
            star_path = self.module_paths.get(star)
            star_facts = self._raw_files.get(star_path) if star_path is not None else None
            if star_facts is None:
                continue
            self._record(f"i:{star_path}:{name}")
            found = self._bound_names(star_path, star_facts).get(name) or self.star_imported(star, name, depth + 1)
            if found is not None:
                return found
        return None

    @cached_property
    def _star_answers(self) -> dict[tuple[str, str, int], str | None]:
        return {}

    @cached_property
    def _bound_names_by_path(self) -> dict[str, tuple[FileFacts, dict[str, str]]]:
        return {}

    def _bound_names(self, path: str, facts: FileFacts) -> dict[str, str]:
        """What the file binds each of its names to (`facts.names` as a mapping), kept
        while its facts are these."""
        table = self._bound_names_by_path
        kept = table.get(path)
        if kept is None or kept[0] is not facts:
            kept = table[path] = (facts, dict(facts.names))
        return kept[1]

    def summary_in_file(self, path: str | None, name: str) -> FunctionSummary | None:
        """The summary of function `name` (absolute) in the file at `path`, if it has one: a
        lookup reads `u:<name>`, not the file's facts, so a function added beside it
        changes nothing the reader saw."""
        self._record(f"u:{name}")
        facts = self._raw_files.get(path) if path is not None else None
        if facts is None:
            return None
        return self._summaries_of(path, facts).get(name)

    def _summaries_of(self, path: str, facts: FileFacts) -> dict[str, FunctionSummary]:
        table = self._summaries_by_path
        kept = table.get(path)
        if kept is None or kept[0] is not facts:
            kept = table[path] = (facts, {s.name: s for s in facts.summaries})
        return kept[1]

    @cached_property
    def _summaries_by_path(self) -> dict[str, tuple[FileFacts, dict[str, FunctionSummary]]]:
        return {}

    def path_of(self, name: str) -> str | None:
        """The relative path of the file an absolute name is defined in."""
        parts = name.split(".")
        for end in range(len(parts) - 1, 0, -1):
            path = self.module_paths.get(".".join(parts[:end]))
            if path is not None:
                return path
        return None

    def ancestors_after(self, name: str, after: str) -> list[str]:
        """`ancestors(name)` after class `after`: where `super()` written in `after` looks."""
        ancestors = self.ancestors(name)
        return ancestors[ancestors.index(after) + 1 :] if after in ancestors else []

    @cached_property
    def _by_short_name(self) -> dict[str, list[str]]:
        """Every function and class name by its last part: the names `name` may be a dotted
        suffix of (a script's `from helpers import f` names `scripts.helpers.f` as
        `helpers.f`, and a src-layout package is imported without its `src.`)."""
        table: dict[str, list[str]] = {}
        for name in (*self._function_table, *self._class_table):
            table.setdefault(name.rpartition(".")[2], []).append(name)
        return self._recording(table, "s:", ALL_NAMES)

    def _resolve_name(self, name: str, names: Container[str]) -> str | None:
        if name in names:
            return name
        if "." not in name:
            return None  # a suffix of two parts or more
        ending = f".{name}"
        candidates = [c for c in self._by_short_name.get(name.rpartition(".")[2], ()) if c.endswith(ending) and c in names]
        return candidates[0] if len(candidates) == 1 else None

    def function(self, name: str) -> FunctionFacts | None:
        return self._definition(name, "functions")

    def class_named(self, name: str) -> ClassFacts | None:
        return self._definition(name, "classes")

    def functions_with_event(self, path: str, kinds: Container[EventKind], line: int) -> list[FunctionFacts]:
        """The functions of file `path` with an event of one of `kinds` at `line` (the
        function holding an FSDP use): reads `fn:` of each found, not the whole file's facts,
        so a definition added elsewhere in the file leaves the answer's readers alone. (An
        event moved to another function changes the old function's `fn:`.)"""
        facts = self._raw_files.get(path)
        found = [
            function for function in (facts.functions if facts is not None else ())
            if any(event.kind in kinds and event.line == line for event in function.events)
        ]
        self._record(f"h:{path}")
        for function in found:
            self._record(f"fn:{function.name}")
        return found

    def class_names(self) -> Iterable[str]:
        """Every project class's name; reads `B` (every class's name and bases), which an
        edit moving classes to other lines leaves as it was."""
        self._record(ALL_BASES)
        return self._class_table.keys()

    def is_class(self, name: str) -> bool:
        """Whether the project defines a class of this absolute name (reads `cb:<name>`)."""
        return name in self._class_bases

    def subclasses_of(self, name: str) -> list[str]:
        """The project classes deriving from class `name`, through any number of bases; reads
        their names and bases only (`class_names`, `ancestors`)."""
        return [other for other in self.class_names() if other != name and name in self.ancestors(other)[1:]]

    def function_summary(self, name: str) -> FunctionSummary | None:
        """The summary of project function `name`, also of one with no facts (`def
        count_parameters(model): ...` does nothing the facts record to what it is given):
        found in its module's file, through a package `__init__`'s re-export, or without
        leading package parts (a `src.` its imports write)."""
        parts = name.split(".")
        for start in range(len(parts) - 1):
            found = self._summary_named(".".join(parts[start:]))
            if found is not None:
                return found
        return None

    def _summary_named(self, name: str, _hops: int = 0) -> FunctionSummary | None:
        path = self.path_of(name)
        facts = self._raw_files.get(path) if path is not None else None
        if facts is None:
            return None
        self._record(f"u:{name}")
        found = self._summaries_of(path, facts).get(name)
        if found is not None:
            return found
        rest = name[len(facts.module) + 1 :] if name.startswith(f"{facts.module}.") else ""
        head = rest.split(".", 1)[0]
        if head:
            self._record(f"i:{path}:{head}")
        imported = dict(facts.names).get(head) if head else None
        if imported is None or imported == f"{facts.module}.{head}" or _hops >= 4:
            return None
        return self._summary_named(imported + rest[len(head) :], _hops + 1)

    def _definition(self, name: str, kind: str, _hops: int = 0, *, bases_only: bool = False):
        """The function or class (`kind`) a name refers to: found in its module's file, or
        where that module imports it from (a package's `__init__` re-exporting it), else, for
        a name that may be the project's written differently, among every file's. With
        `bases_only`, a class whose caller reads only its name and bases: the read is `cb:`,
        not `c:` (which changes with the class's lines, its methods...)."""
        path = self.path_of(name)
        facts = self._raw_files.get(path) if path is not None else None
        if facts is not None:
            self._record(f"{'cb:' if bases_only else _DEFINITION_KEYS[kind]}{name}")
        found = facts.named(kind, name) if facts is not None else None
        if found is None and facts is not None and _hops < 4:
            rest = name[len(facts.module) + 1 :] if name.startswith(f"{facts.module}.") else ""
            head = rest.split(".", 1)[0]
            if head:
                self._record(f"i:{path}:{head}")
            imported = dict(facts.names).get(head) if head else None
            if imported is not None and imported != f"{facts.module}.{head}":
                found = self._definition(imported + rest[len(head):], kind, _hops + 1, bases_only=bases_only)
        if found is not None or not self._may_name_the_project(name):
            return found
        everything = self._class_bases if bases_only else getattr(self, kind)
        resolved = self._resolve_name(name, everything)
        return everything.get(resolved) if resolved else None

    def _may_name_the_project(self, name: str) -> bool:
        """Whether a name its module does not resolve may still be the project's, written
        differently (`helpers.f` for `scripts/helpers.py`, a `src/` layout): it starts with
        a component of a project module's name. `torch.nn.BatchNorm2d` in a project that is
        not torch does not, and is never looked up in every file's facts."""
        return name.split(".", 1)[0] in self._module_components

    @cached_property
    def _module_components(self) -> Mapping[str, bool]:
        table = dict.fromkeys(part for module in self._module_table for part in module.split("."))
        return self._recording(table, "p:", ALL_PATHS)

    def script_paths(self) -> frozenset[str]:
        """The project's scripts (`project_paths.script_paths`); reads `S`, which a module added
        to a package leaves as it was."""
        self._record(ALL_SCRIPTS)
        return self._script_paths

    @cached_property
    def _script_paths(self) -> frozenset[str]:
        return script_paths(self._raw_files)

    def top_folders(self) -> frozenset[str]:
        """The top-level folders the project's files lie in; reads `T`."""
        self._record(TOP_FOLDERS)
        return self._top_folders

    @cached_property
    def _top_folders(self) -> frozenset[str]:
        return top_folders(self._raw_files)

    def has_module_prefix(self, name: str) -> bool:
        """Whether some project module is `name` or lies in it (`pkg.models` for
        `pkg/models/bert.py`); reads `mp:<name>`, so a module added beside others changes no
        answer."""
        return name in self._module_prefixes

    @cached_property
    def _module_prefixes(self) -> Mapping[str, bool]:
        table = dict.fromkeys(
            ".".join(parts[:end]) for module in self._module_table for parts in [module.split(".")]
            for end in range(1, len(parts) + 1)
        )
        return self._recording(table, "mp:", ALL_PATHS)

    def facts_of(self, name: str) -> FileFacts | None:
        """The facts of the file an absolute name is defined in (`pkg.mod.Class.method` ->
        `pkg/mod.py`), found by its module without loading any other file."""
        path = self.path_of(name)
        return self.files.get(path) if path is not None else None

    @cached_property
    def _module_table(self) -> dict[str, str]:
        return {module_name(path): path for path in self._raw_files if not path.endswith(CONFIGURATION_SUFFIXES)}

    @cached_property
    def module_paths(self) -> Mapping[str, str]:
        """Module name -> relative path, for every Python file of the project (a lookup
        reads `m:<module>`)."""
        return self._recording(self._module_table, "m:", ALL_PATHS)

    @cached_property
    def names_table(self) -> Mapping[str, list[str]]:
        """Every absolute name some file's imports or definitions refer to -> those files
        (`ckptlint.model.project.call_sites`; a lookup reads `n:<name>`)."""
        named = self._names_by_path
        table: dict[str, list[str]] = {}
        for path in self._raw_files:
            for _, absolute in named[path]:
                table.setdefault(absolute, []).append(path)
        return self._recording(table, "n:", ALL_NAMES)

    def names_of(self, path: str) -> list[str]:
        """The absolute names a file's imports and definitions refer to, in order (reads
        `nm:<path>`: an edit that binds no other name changes no answer)."""
        self._record(f"nm:{path}")
        return [absolute for _, absolute in self._names_by_path.get(path, ())]

    @cached_property
    def _names_by_path(self) -> dict[str, tuple[tuple[str, str], ...]]:
        """Each file's names (`FileFacts.names`: local name -> absolute name), kept between
        runs file by file (`stored_by_path`): after an edit only the edited files' facts are
        loaded for the tables made of them."""
        from ckptlint.model.project.stored_tables import TableCodec, stored_by_path

        files = self._raw_files
        return self._per_path("_names_by_path", lambda path: files[path].names) or stored_by_path(
            self.table_store, self.exported, "names", files, lambda path: files[path].names,
            TableCodec(lambda names: [list(pair) for pair in names], _names_from_json),
        )

    @cached_property
    def _aliases_table(self) -> dict[str, list[str]]:
        table: dict[str, list[str]] = {}
        for path, named in self._names_by_path.items():
            if path.endswith("__init__.py"):
                module = module_name(path)
                for local, absolute in named:
                    alias = f"{module}.{local}"
                    if absolute != alias:
                        table.setdefault(absolute, []).append(alias)
        for absolute, aliases in list(table.items()):
            for alias in list(aliases):
                aliases.extend(a for a in table.get(alias, ()) if a not in aliases)
        return table

    def reexported_as(self, absolute: str) -> list[str]:
        """The names package `__init__` files re-export an absolute name under (two levels
        of re-export followed); reads `a:` of the name and of each of those names."""
        found = self._aliases_table.get(absolute, [])
        if self.read_log is not None:
            self.read_log.record(f"a:{absolute}")
            self.read_log.record_all(f"a:{alias}" for alias in found)
        return found

    def ancestors(self, name: str) -> list[str]:
        """The class and its bases defined in the project (and external bases by name); reads
        the names and bases of the classes on the way (`cb:`), not their lines or members."""
        found: list[str] = []
        pending = [name]
        while pending and len(found) < 64:
            current = pending.pop()
            facts = self._definition(current, "classes", bases_only=True)
            resolved = facts.name if facts else current
            if resolved in found:
                continue
            found.append(resolved)
            if facts is not None:
                pending.extend(facts.bases)
        return found

    @tracked_cached_property(cutoff=True)
    def training_arguments_classes(self) -> frozenset[str]:
        """transformers' and TRL's argument classes, and the project's subclasses of them."""
        known = set(TRAINING_ARGUMENTS_CLASSES)
        changed = True
        self._record(ALL_BASES)  # what it reads of every class
        while changed:
            changed = False
            for name, bases in self._bases_by_class.items():
                if name not in known and any(b in known or self._resolve_name(b, known) for b in bases):
                    known.add(name)
                    changed = True
        return frozenset(known)

    def is_training_arguments(self, name: str) -> bool:
        answers = self._training_arguments_answers
        found = answers.get(name)
        if found is None:
            known = self.training_arguments_classes
            facts = self.class_named(name) if name not in known else None
            found = answers[name] = name in known or (facts is not None and facts.name in known)
        return found

    @cached_property
    def _training_arguments_answers(self) -> dict[str, bool]:
        return {}  # the interpreter asks for every call it meets

    @tracked_cached_property(cutoff=True)
    def wrapped_classes(self) -> tuple[tuple[str, WrappedClass], ...]:
        """(relative path, entry) for every class wrapped for activation checkpointing."""
        return tuple(
            sorted(((path, w) for path, facts in self._files_of_kind(WRAPS_KIND) for w in facts.wrapped_classes),
                   key=lambda item: (item[0], item[1].line))
        )

    def wrapping_of(self, class_name: str) -> tuple[str, WrappedClass] | None:
        """Where instances of `class_name` (or of one of its bases) get checkpoint-wrapped."""
        if not self.wrapped_classes:
            return None
        lineage = self.ancestors(class_name)
        simple = {name.rsplit(".", 1)[-1] for name in lineage}
        for path, wrapped in self.wrapped_classes:
            resolved = self._resolve_name(wrapped.name, self.classes) or wrapped.name
            if resolved in lineage or ("." not in wrapped.name and wrapped.name in simple):
                return path, wrapped
        return None

    def function_randomness(self, name: str) -> tuple[str, ...]:
        """The random operations a function outside classes draws in its own code, described
        (`EventKind.DRAWS_RANDOM`)."""
        path = self.path_of(name)
        facts = self.files.get(path) if path is not None else None
        function = facts.named("functions", name) if facts is not None else None
        return tuple(
            f"{e.api} (line {e.line})" for e in (function.events if function is not None else ())
            if e.kind is EventKind.DRAWS_RANDOM
        )

    def class_method(self, name: str, method: str) -> MethodFacts | None:
        found = self.class_method_in(name, method)
        return found[1] if found is not None else None

    def class_method_in(self, name: str, method: str, after: str | None = None) -> tuple[str, MethodFacts] | None:
        """The class among `name`'s ancestors (after `after`, for `super().<method>` written
        in class `after`) that defines `method`, and what the method does."""
        for ancestor in self.ancestors(name) if after is None else self.ancestors_after(name, after):
            facts = self.class_named(ancestor)
            for candidate in facts.methods if facts is not None else ():
                if candidate.name == method:
                    return facts.name, candidate
        return None

    @tracked_cached_property(cutoff=True)
    def checkpoint_wrappers(self) -> tuple[str, ...]:
        """The project's functions that run one of their parameters under torch's checkpoint."""
        return tuple(
            sorted(f.name for _, facts in self._files_of_kind(CHECKPOINTING_KIND) for f in checkpointing_functions(facts))
        )

    def checkpointed_parameter(self, name: str) -> int | None:
        """For a project function that hands one of its parameters to torch's checkpoint as
        the function to run (timm's `checkpoint_seq`, fairseq's `checkpoint_wrapper`-style
        helpers): that parameter's position."""
        facts = self.function(name)
        if facts is None:
            return None
        for event in facts.events:
            if event.kind is EventKind.RUNS_CHECKPOINTED and event.target in facts.parameters:
                return facts.parameters.index(event.target)
        return None

    @tracked_cached_property(cutoff=True)
    def hf_checkpointing_calls(self) -> tuple[tuple[str, int, bool], ...]:
        """Every `gradient_checkpointing_enable(...)` call of the project: (path, line, whether
        it leaves the kwargs to transformers' default)."""
        return tuple(sorted(
            (path, event.line, event.source == DEFAULT_KWARGS)
            for path, facts in self._files_of_kind(HF_CHECKPOINTING_KIND)
            for function in facts.functions
            for event in function.events
            if event.kind is EventKind.HF_GC
        ))


_DEFINITION_KEYS = {"classes": "c:", "functions": "fn:", "forwarding": "fw:"}


class OverlaidFacts(Mapping):
    """The facts of a project with one file's replaced, without loading the others."""

    def __init__(self, files: Mapping[str, FileFacts], key: str, facts: FileFacts) -> None:
        self._files, self._key, self._facts = files, key, facts

    def __getitem__(self, key: str) -> FileFacts:
        return self._facts if key == self._key else self._files[key]

    def __iter__(self):
        yield from self._files
        if self._key not in self._files:
            yield self._key

    def __len__(self) -> int:
        return len(self._files) + (self._key not in self._files)

    def __contains__(self, key: object) -> bool:
        return key == self._key or key in self._files

    def __reduce__(self):
        return (dict, (dict(self.items()),))


class DefinitionTable(Mapping):
    """Every class (or function) of the project by absolute name, as `{c.name: c for facts in
    files.values() for c in facts.classes}` would hold them (a name defined twice: where it
    is first, the last definition), from each file's names (`defined`: (name, bases) of its
    classes, names of its functions): looking a name up,
    or walking the names, loads no facts but those of the file defining it."""

    def __init__(self, files: Mapping[str, FileFacts], defined: Mapping[str, tuple], kind: str) -> None:
        self._files, self._kind = files, kind
        index = 0 if kind == "classes" else 1
        self._paths: dict[str, str] = {}
        self._by_path: dict[str, dict] = {}  # each file's definitions by name, the last one of a name
        for path in files:
            for name in defined[path][index]:
                self._paths[name if index else name[0]] = path

    def __getitem__(self, name: str):
        path = self._paths[name]
        table = self._by_path.get(path)
        if table is None:
            table = self._by_path[path] = {d.name: d for d in getattr(self._files[path], self._kind)}
        return table[name]

    def __contains__(self, name: object) -> bool:
        return name in self._paths

    def __iter__(self):
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)

    def __reduce__(self):
        return (dict, (dict(self.items()),))


def _definitions_from_json(value: object) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[str, ...]]:
    classes, functions = value
    return tuple((str(name), tuple(map(str, bases))) for name, bases in classes), tuple(map(str, functions))


def _names_from_json(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list):
        raise TypeError(value)
    return tuple((str(local), str(absolute)) for local, absolute in value)
