"""The project index's questions about FSDP: where the project shards a model, which of
those uses can apply to a file (`ckptlint.model.project.scripts`: an entry script's use reaches what
it imports, not the other entry scripts; tests keep theirs), and which project functions
wrap a model in FSDP1 (a caller of one reaches CKPT003 without naming FSDP). A mixin of
`ckptlint.model.index.ProjectIndex`, which provides `files`, `_files_of_kind`,
`_resolve_name`, `training_arguments_classes` and `call_sites`."""

from __future__ import annotations

import posixpath
from functools import cached_property

from ckptlint.model.project.reads import tracked_cached_property

from ckptlint.model.file_facts.facts import EventKind, FsdpKind, FsdpUse
from ckptlint.model.syntax.file_kinds import CONFIGURATION_SUFFIXES
from ckptlint.model.syntax.names import is_test_path
from ckptlint.model.form.summary import MODULE_LEVEL

FSDP_KIND = "fsdp"
LAUNCH_KIND = "launches"  # launch scripts running `accelerate launch` (`ckptlint.model.file_facts.launch_scripts`)


class FsdpQueries:
    @tracked_cached_property(cutoff=True)
    def fsdp_uses(self) -> tuple[FsdpUse, ...]:
        using = list(self._files_of_kind(FSDP_KIND))
        uses = [use for _, facts in using for use in facts.fsdp]
        for path, facts in using:
            for callee, line in facts.fsdp_argument_calls:
                # `training_arguments_classes` scans every class: only asked when needed.
                if self._resolve_name(callee, self.training_arguments_classes):
                    uses.append(FsdpUse(FsdpKind.HF_TRAINER, path, line))
        uses.extend(self._accelerate_launches())
        return tuple(sorted(uses, key=lambda u: (u.path, u.line, u.kind.value)))

    def _accelerate_launches(self) -> list[FsdpUse]:
        """`accelerate launch --config_file <config> <entry>` commands of the project's launch
        scripts whose config (or own options) turn FSDP on, as uses of the file they run."""
        uses = []
        for script, facts in self._files_of_kind(LAUNCH_KIND):
            for launch in facts.launches:
                config = self._launched_file(script, launch.config) if launch.config else None
                version = launch.fsdp_version or (self.files[config].accelerate_fsdp if config is not None else 0)
                entry = self.path_of(f"{launch.entry}.x") if launch.module else self._launched_file(script, launch.entry)
                if version and entry is not None and not entry.endswith(CONFIGURATION_SUFFIXES):
                    uses.append(FsdpUse(FsdpKind.ACCELERATE_LAUNCH, script, launch.line, entry, config or "", version))
        return uses

    def _launched_file(self, script: str, written: str) -> str | None:
        """A file a launch script names, as the project holds it: relative to the project
        root (where scripts are run from), else to the script's own directory."""
        if written.startswith(("/", "~", "$")):
            return None
        for base in ("", posixpath.dirname(script)):
            candidate = posixpath.normpath(posixpath.join(base, written))
            if candidate in self.files:
                return candidate
        return None

    @tracked_cached_property(cutoff=True)
    def fsdp_wrapper_words(self) -> frozenset[str]:
        """The simple names of the project functions that wrap a model in FSDP1 with an
        auto-wrap policy."""
        return frozenset(
            f.name.rsplit(".", 1)[-1] for _, facts in self._files_of_kind(FSDP_KIND) for f in facts.functions
            if any(e.kind is EventKind.FSDP1 and e.auto_wrap for e in f.events) and not f.name.endswith(MODULE_LEVEL)
        )

    def mentions_fsdp_wrapper(self, text: str) -> bool:
        """Whether `text` may call one of them (a cheap test on the text, before any parse)."""
        return any(f"{word}(" in text for word in self.fsdp_wrapper_words)

    def fsdp_uses_reaching(self, relative_path: str) -> tuple[FsdpUse, ...]:
        """The FSDP uses that can apply to the code of one file: a test sees its own (a test
        sharding a model is no sign the other tests do, nor is the package's FSDP code), the
        package and its scripts see theirs, not the tests' (a test that shards is no sign the
        package trains sharded)."""
        if is_test_path(relative_path):
            return tuple(use for use in self.fsdp_uses if use.path == relative_path)
        return tuple(use for use, excluded in self._fsdp_excluded() if relative_path not in excluded)

    def imported_by(self, relative_path: str) -> set[str]:
        """The project files a file imports (`ckptlint.model.project.scripts`)."""
        return self._script_reach.imported_files(relative_path)

    @tracked_cached_property(cutoff=True)
    def fsdp_reach(self) -> tuple[tuple[FsdpUse, tuple[str, ...]], ...]:
        """Each FSDP use outside the tests with the files it cannot apply to
        (`ckptlint.model.project.scripts`). One table for the project, read by its key: what
        it rests on (which files are scripts, what they import, who calls a sharding helper)
        is read of every file, and a module added to a package, or a statement in a model,
        leaves the table, and every file that asked, as it was."""
        reach = self._fresh_script_reach()
        return tuple(
            (use, tuple(sorted(
                (reach.reached_from_entry(use.launched) if use.launched else reach.reached_by(use.path, use.line)).excluded
            )))
            for use in self.fsdp_uses if not is_test_path(use.path)
        )

    def _fsdp_excluded(self) -> list[tuple[FsdpUse, frozenset[str]]]:
        return self._with_sets("_fsdp_excluded_sets", self.fsdp_reach)

    def _with_sets(self, slot: str, table: tuple) -> list:
        """A reach table's (use, paths) rows with the paths as a set, kept while the table is
        this one."""
        kept = self.__dict__.get(slot)
        if kept is None or kept[0] is not table:
            kept = self.__dict__[slot] = (table, [(use, frozenset(paths)) for use, paths in table])
        return kept[1]

    def _fresh_script_reach(self):
        """A reach of scripts with a call graph of its own: a table computed from it records
        every read it makes (the index's call graph remembers answers another reader paid for)."""
        from ckptlint.model.project.call_sites import CallSites
        from ckptlint.model.project.scripts import ScriptReach

        return ScriptReach(self, CallSites(self))

    @cached_property
    def _script_reach(self):
        from ckptlint.model.project.scripts import ScriptReach

        return ScriptReach(self, self.call_sites)
