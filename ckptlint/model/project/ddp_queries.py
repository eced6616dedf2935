"""The project index's questions about DDP with unused-parameter detection (CKPT006): where
the project sets `find_unused_parameters=True` (torch's `DistributedDataParallel`, Lightning's
DDP strategy, accelerate's `DistributedDataParallelKwargs`, `TrainingArguments`), and which of
those can apply to a file, with the reach FSDP uses have (`ckptlint.model.project.scripts`:
an entry script's use reaches what it imports, not the other entry scripts; a test file sees
only its own). A mixin of `ckptlint.model.index.ProjectIndex`, beside `FsdpQueries` (which
provides `_script_reach`, `_fresh_script_reach` and `_with_sets`)."""

from __future__ import annotations

from ckptlint.model.project.reads import tracked_cached_property

from ckptlint.model.file_facts.facts import DdpUse
from ckptlint.model.project.project_facts import RECOMPUTE_KIND, REGISTRY_KIND
from ckptlint.model.project.scripts import importing_closure
from ckptlint.model.syntax.names import is_test_path

DDP_KIND = "ddp"


class DdpQueries:
    @tracked_cached_property(cutoff=True)
    def ddp_uses(self) -> tuple[DdpUse, ...]:
        uses = [use for _, facts in self._files_of_kind(DDP_KIND) for use in facts.ddp]
        return tuple(sorted(uses, key=lambda u: (u.path, u.line, u.kind.value)))

    def ddp_uses_reaching(self, relative_path: str, *, plain_too: bool = False) -> tuple[DdpUse, ...]:
        """The DDP uses with `find_unused_parameters=True` that can apply to the code of one
        file; with `plain_too`, torch's `DistributedDataParallel` without it as well."""
        if is_test_path(relative_path):
            uses = tuple(use for use in self.ddp_uses if use.path == relative_path)
        else:
            uses = tuple(use for use, reached in self._ddp_reached() if relative_path in reached)
        return uses if plain_too else tuple(use for use in uses if use.find_unused)

    @tracked_cached_property(cutoff=True)
    def ddp_reach(self) -> tuple[tuple[DdpUse, tuple[str, ...]], ...]:
        """Each DDP use outside the tests with the files it can apply to: those FSDP's reach
        allows that are also the use's own program, `path` and what it imports (through any
        number of imports), or the program of a file importing `path` (a `wrap_ddp(model)`
        helper: the scripts calling it, and what they import). Narrower than FSDP's: a DDP
        setting of one script says nothing of a model no import brings to it. One table for the
        project, read by its key (`fsdp_reach`)."""
        reach = self._fresh_script_reach()
        graph = self.import_graph
        found = []
        for use in self.ddp_uses:
            if is_test_path(use.path):
                continue
            allowed = reach.reached_by(use.path, use.line)
            programs = [importing_closure(graph.__getitem__, use.path)] + [
                importing_closure(graph.__getitem__, other) for other in sorted(self.files)
                if other != use.path and use.path in graph[other]
            ]
            found.append((use, tuple(sorted(
                f for f in self.files if f in allowed and any(f in program for program in programs)
            ))))
        return tuple(found)

    @tracked_cached_property(cutoff=True)
    def import_graph(self) -> dict[str, frozenset[str]]:
        """Each file with the project files it imports (`ScriptReach.imported_files`): one table
        for the project, which an edit that imports nothing new leaves as it was (the editor's
        index with a buffer laid over it keeps it: `ProjectIndex.inherited_table`)."""
        reach = self._fresh_script_reach()
        return {path: frozenset(reach.imported_files(path)) for path in sorted(self.files)}

    def _ddp_reached(self) -> list[tuple[DdpUse, frozenset[str]]]:
        return self._with_sets("_ddp_reached_sets", self.ddp_reach)

    def parallel_launch_of(self, relative_path: str) -> str | None:
        """Where a launch script of the project runs this file on several processes
        (`scripts/train.sh:3`), for a message; None when none does."""
        return self._launch_of(relative_path, lambda facts: facts.parallel_launches)

    def checkpointing_launch_of(self, relative_path: str) -> str | None:
        """Where a launch script of the project passes `--gradient_checkpointing True` to the
        program this file belongs to (`scripts/sft.sh:12`, the flag's line): the file itself,
        or a module the launched script imports (`torchrun train_mem.py` whose `train()` comes
        from `fastchat/train/train.py`); None when none does."""
        return self._launch_of(relative_path, lambda facts: facts.checkpointing_launches, imported_too=True)

    def _launch_of(self, relative_path: str, launches_of, imported_too: bool = False) -> str | None:
        from ckptlint.model.project.fsdp_queries import LAUNCH_KIND

        reach = None
        for script, facts in self._files_of_kind(LAUNCH_KIND):
            for entry, line in launches_of(facts):
                launched = self._launched_file(script, entry)
                if launched is None:
                    continue
                if launched != relative_path and imported_too:
                    reach = reach or self._fresh_script_reach()
                    if relative_path not in reach.imported_files(launched):
                        continue
                elif launched != relative_path:
                    continue
                return f"{script}:{line}"
        return None

    def checkpoints_behind_flag(self, flag: str, module: str | None = None) -> tuple[tuple[str, bool | None], ...]:
        """(class, reentrant) for each checkpoint call in a project class's method that runs only
        with `self.<flag>` on (`if self.use_checkpoint: x = checkpoint.checkpoint(blk, x)`): what
        an OpenMMLab config's `use_checkpoint=True` / `with_cp=True` turns on; only the classes
        of `module` when given."""
        return tuple(
            (c.name, call.reentrant)
            for _, facts in self._files_of_kind(RECOMPUTE_KIND) if module is None or facts.module == module
            for c in facts.classes for method in c.methods for call in method.checkpoints if flag in call.flags
        )

    def modules_defining_class(self, short_name: str) -> frozenset[str]:
        """The project modules that define a class of this name (a config's `type="FocalNet"`)."""
        return frozenset(
            facts.module for _, facts in self._files_of_kind(REGISTRY_KIND)
            for c in facts.classes if c.name.rpartition(".")[2] == short_name
        ) or frozenset(
            self.files[path].module for name in self._by_short_name.get(short_name, ())
            if name in self.classes and (path := self.path_of(name)) is not None
        )
