"""Which files an FSDP use can apply to, by the project's entry scripts.

A script is a file of a directory that is not a package (no `__init__.py`): the project's top
level (`pretrain_fsdp.py` beside `sft.py`), or a folder of examples or scripts
(`examples/sharded/train.py`, run from its own directory and importing its siblings by their
bare names). A training script that no other script imports applies its FSDP use to itself,
to what it imports and to the project's package modules (whose models it may be handed), not
to the project's other training scripts (they train with `backward()` or a trainer), which
run on their own. A package function that shards (`wrap_with_fsdp(model)` in a
`training_utils` module) does so where it is called: its use applies to the package and to
the scripts that call it (through other package functions too) and what they import, not to
the training scripts that never call it. Any other use (a package function called by
nothing the model sees, an entry point run by `fire.Fire(main)` or a helper handed around
as a value; a package module's top-level code) applies everywhere but the training scripts
that never import its module, even through others (a quickstart training with the
package's loop: a training script runs `backward()`, or hands a model to a trainer or to a
project function that does): everywhere in its own top-level folder, that is, when the repository holds separate projects side by side in
folders that are not packages (`beit/`, `PFPO/`) and no import joins the two.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import cached_property
from typing import TYPE_CHECKING

from ckptlint.model.file_facts.facts import EventKind
from ckptlint.model.syntax.names import is_test_path
from ckptlint.model.syntax.project_paths import directory as _directory, top_folder as _folder
from ckptlint.model.form.summary import MODULE_LEVEL

if TYPE_CHECKING:
    from ckptlint.model.project.call_sites import CallSites
    from ckptlint.model.project.project_facts import ProjectFacts


def importing_closure(imported_files: Callable[[str], Iterable[str]], path: str) -> set[str]:
    """`path` and the files it imports (`imported_files` of a file), through any number of imports."""
    reached, pending = {path}, [path]
    while pending:
        for target in imported_files(pending.pop()):
            if target not in reached:
                reached.add(target)
                pending.append(target)
    return reached


class EverythingBut:
    """Every file but some."""

    def __init__(self, excluded: frozenset[str] = frozenset()) -> None:
        self.excluded = excluded

    def __contains__(self, item) -> bool:
        return item not in self.excluded


EVERY_FILE = EverythingBut()

# How far calls are followed back from a sharding helper to the scripts that call it.
_CALLER_DEPTH = 4
_TRAINING = (EventKind.BACKWARD, EventKind.TRAINER)


class ScriptReach:
    """Which files of a project its FSDP uses reach (above), with the call graph that says
    where a package function is called; one per index (`FsdpQueries`), keeping what it
    computes once for the project (the groups of top-level folders imports join)."""

    def __init__(self, index: ProjectFacts, call_sites: CallSites) -> None:
        self.index = index
        self.call_sites = call_sites

    def reached_by(self, path: str, line: int = 0) -> EverythingBut:
        """The files an FSDP use at `path:line` can apply to: as the scripts decide (below), never
        the files of another project folder that shares no import with its own."""
        reach = self._reached_in_folder(path, line)
        apart = self._separate_folders(path)
        return EverythingBut(reach.excluded | apart) if apart else reach

    def reached_from_entry(self, path: str) -> EverythingBut:
        """The files an FSDP use applies to when a launch runs `path` under FSDP (`accelerate
        launch --config_file fsdp.yaml path`): `path` and what it imports, through any number of
        imports, and nothing else. Unlike a use written in code, which may hand its model to any
        package module, the launch names the one program the processes run: a package of
        examples launched one by one (`examples/sft/train.py` sharded beside
        `examples/dreambooth/train.py`) shares nothing with it."""
        reached = self._importing_closure(path)
        return EverythingBut(frozenset(other for other in self.index.files if other not in reached))

    def _importing_closure(self, path: str) -> set[str]:
        return importing_closure(self.imported_files, path)

    def _reached_in_folder(self, path: str, line: int) -> EverythingBut:
        if path not in self.index.files:
            return EVERY_FILE
        scripts = sorted(self.index.script_paths())
        imported = {target for script in scripts for target in self.imported_files(script) if target != script}
        if path in scripts and path not in imported:
            return self._script_reach(path, scripts, imported)
        callers = self._calling_scripts(path, line, set(scripts))
        if callers is None:
            # Called by what the project model cannot see (an entry point, `fire.Fire(main)`):
            # not in a training script that never imports its module, even through others (a
            # quickstart notebook training with the package's loop, single-GPU).
            return EverythingBut(frozenset(
                other for other in scripts
                if other not in imported and self._trains(other) and path not in self._importing_closure(other)
            ))
        excluded: frozenset[str] | None = None
        for caller in sorted(callers):
            reach = self._script_reach(caller, scripts, imported) if caller not in imported else EVERY_FILE
            excluded = reach.excluded if excluded is None else excluded & reach.excluded
        if excluded is None:  # called by no script: none of the training scripts shards through it
            excluded = frozenset(other for other in scripts if other not in imported and self._trains(other))
        return EverythingBut(excluded)

    def _calling_scripts(self, path: str, line: int, scripts: set[str]) -> set[str] | None:
        """The scripts that call the package function holding the FSDP use at `path:line`,
        directly or through other package functions; None when the use is not in such a function,
        or when a function on the way is handed around as a value or called by nothing (an API
        the package offers: its callers are not known)."""
        facts = self.index.files[path]
        holders = [s.name for s in facts.summaries if not s.name.endswith(MODULE_LEVEL) and any(l == line for _, l in s.calls)]
        if len(holders) != 1:
            return None
        found: set[str] = set()
        seen, pending = set(holders), [(holders[0], facts.module, 0)]
        while pending:
            function, module, depth = pending.pop()
            if depth > _CALLER_DEPTH or self.call_sites.named_as_value(function, module):
                return None
            calls = [(p, caller) for p, caller, _, _ in self.call_sites.calls_of(function, module) if caller.name != function]
            if not calls:
                return None
            for caller_path, caller in calls:
                if is_test_path(caller_path):
                    continue  # a test sharding through it is no sign the package's scripts do
                if caller_path in scripts:
                    found.add(caller_path)
                elif not caller.name.endswith(MODULE_LEVEL) and caller.name not in seen:
                    seen.add(caller.name)
                    pending.append((caller.name, self.index.files[caller_path].module, depth + 1))
                elif caller.name.endswith(MODULE_LEVEL):
                    return None  # a package module shards at import
        return found

    def _script_reach(self, path: str, scripts: list[str], imported: set[str]) -> EverythingBut:
        """What an entry script's FSDP use applies to: all but the training scripts it does not
        reach through its imports."""
        reached, pending = {path}, [path]
        while pending:
            current = pending.pop()
            for target in self.imported_files(current):
                if target not in reached:
                    reached.add(target)
                    pending.append(target)
        return EverythingBut(frozenset(
            other for other in scripts if other not in reached and other not in imported and self._trains(other)
        ))

    def _separate_folders(self, path: str) -> frozenset[str]:
        """The files of the top-level project folders an FSDP use at `path` cannot reach: a
        repository of separate projects (`beit/`, `dit/`, `PFPO/` side by side, each run from its
        own folder) shares its root, not its training. A top-level folder that is not a package
        (no `__init__.py`: scripts and modules imported by their bare names, or packages of their
        own below it) is apart from `path`'s when no import of the project's files joins them,
        through any other folder or the root's own files. Not for a use in a root-level file, nor
        in or towards a package folder (`mypkg/`, which the scripts of any folder may be handed a
        model of)."""
        own = _folder(path)
        if not own or self._is_package_folder(own) or not self._apart_folders_possible(own):
            return frozenset()
        groups = self._folder_groups
        return frozenset(
            other for other in self.index.files
            if (folder := _folder(other)) and folder != own and not self._is_package_folder(folder)
            and groups.get(folder, folder) != groups.get(own, own)
        )

    def _apart_folders_possible(self, own: str) -> bool:
        """Whether the project has another top-level folder that is not a package (a `src/`
        layout has none: then no import graph need be walked)."""
        return any(folder != own and not self._is_package_folder(folder) for folder in self.index.top_folders())

    @cached_property
    def _folder_groups(self) -> dict[str, str]:
        """Each top-level folder (and "" for the root's own files) -> a representative of the
        folders its files' imports join it to, both ways."""
        parent: dict[str, str] = {}

        def find(folder: str) -> str:
            while parent.get(folder, folder) != folder:
                folder = parent[folder]
            return folder

        for path in self.index.files:
            for target in self.imported_files(path):
                a, b = find(_folder(path)), find(_folder(target))
                if a != b:
                    parent[max(a, b)] = min(a, b)
        return {folder: find(folder) for path in self.index.files for folder in [_folder(path)]}

    def _is_package_folder(self, folder: str) -> bool:
        return f"{folder}/__init__.py" in self.index.files

    def _is_script(self, path: str) -> bool:
        """A file of a directory that is not a package (the top level included)."""
        if path.endswith("__init__.py"):
            return False
        directory = _directory(path)
        return f"{directory}/__init__.py" not in self.index.files if directory else True

    def imported_files(self, path: str) -> set[str]:
        """The project files `path` imports: by absolute name, or, for a script, a sibling by its
        bare name (`from model import Net` in `examples/sharded/train.py`)."""
        directory = _directory(path)
        prefix = f"{directory.replace('/', '.')}." if directory and self._is_script(path) else ""
        found = set()
        for absolute in self.index.names_of(path):
            for name in (absolute, f"{prefix}{absolute}") if prefix else (absolute,):
                target = self.index.path_of(f"{name}.x") or self.index.path_of(name)
                if target is not None:
                    found.add(target)
                    break
        return found

    def _trains(self, path: str) -> bool:
        """A training script: a function of it runs `backward()` or hands a model to a trainer,
        or hands it to a project function that does (`train(model, loader, ...)` from the
        package's training utilities: a notebook of its own, not the package's sharded run)."""
        facts = self.index.files.get(path)
        return facts is not None and any(
            e.kind in _TRAINING or (e.kind is EventKind.CALL and e.callee and self._function_trains(e.callee))
            for f in facts.functions for e in f.events
        )

    def _function_trains(self, name: str) -> bool:
        path = self.index.path_of(name)
        facts = self.index.files.get(path) if path is not None else None
        function = facts.named("functions", name) if facts is not None else None
        return function is not None and any(e.kind in _TRAINING for e in function.events)
