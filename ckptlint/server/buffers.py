"""Buffers analysed in worker processes, under the command line's per-file limits.

Each open buffer has its own worker (`BufferWorker`: a `WorkerPool` of one process), forked
from the server with what its analysis reads besides its text: a `Snapshot` of its settings
and its project's index (the files on disk, with the other open buffers' unsaved facts laid
over them). The worker stays while that snapshot stands, so its second lint finds the facts
and tables its first one loaded; a new snapshot (a file changed on disk, another buffer's
exported facts changed) forks a new worker from the server. The buffer's own facts changing
keep it: each lint lays the facts of its text over the index anyway, and takes from the
index every table that edit leaves unchanged (`ProjectIndex.inherited_table`). So:

- a buffer that takes too long or too much memory is stopped at the limit (SIGKILL: libcst's
  native parser included) and gets CKPT900 saying which limit, as `ckptlint <file>` would;
  the other buffers' workers go on meanwhile, each in its own process;
- a lint that a newer change supersedes stops at its next safe point (between the phases of
  the analysis, `ckptlint.cancellation`), so its worker and what it loaded stay; one not
  there within `CANCEL_GRACE_SECONDS` is killed;
- a buffer's memory comes back when it is closed (its worker is stopped), and a worker that
  kept more than half the memory limit after a lint is replaced (`WorkerPool`).

The server process itself only holds the indexes. A buffer's own facts (what the project
index would extract from its text) come back from its worker with its findings, from the
extraction its lint made for its project rules (else a `facts` task extracts them once the
findings are out): the server lays them over the index, and lints the project's other open
buffers again when what other files can observe of this one (its exported digest) changed.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckptlint.config import Settings
from ckptlint.discovery import INDEXED_SUFFIXES
from ckptlint.engine import fix_text, lint_text, unknown_noqa_codes
from ckptlint.limits import AnalysisLimits
from ckptlint.model.file_facts.facts import FileFacts
from ckptlint.model.file_facts.fingerprints import exported_digest
from ckptlint.model.index import ProjectIndex
from ckptlint.model.syntax.file_kinds import CONFIGURATION_SUFFIXES
from ckptlint.notebooks import NotebookError, is_notebook_path, read_notebook
from ckptlint.runner import stopped_result
from ckptlint.worker_pool import TaskFailure, WorkerPool


@dataclass(frozen=True)
class BufferFacts:
    """What the project index would hold for a buffer's text: its facts and their
    exported digest (what other files can observe of it)."""

    relative: str
    facts: FileFacts
    exported: str


@dataclass(frozen=True)
class BufferLint:
    """One lint of a buffer: the text it read and what it found. `problems` are messages
    for the server's log (a rule's internal error, a `# noqa` naming no rule). `facts`:
    the text's facts, when the lint extracted them (see the module's docstring)."""

    text: str
    diagnostics: tuple = ()
    problems: tuple[str, ...] = ()
    facts: BufferFacts | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, eq=False)
class Snapshot:
    """What a buffer's analysis reads besides its text. Compared by identity: a worker
    forked with one snapshot serves it until the server makes another, unless the new one
    differs only by the buffer's own unsaved facts (`serves`)."""

    settings: Settings
    index: ProjectIndex | None  # None: no selected rule reads the project, or no project
    limits: AnalysisLimits = field(default_factory=AnalysisLimits)
    # The index of the files on disk `index` was made from, and the open buffers' unsaved
    # facts laid over it, as (relative path, exported digest).
    disk_index: ProjectIndex | None = None
    overlays: tuple[tuple[str, str], ...] = ()

    def serves(self, newer: Snapshot, path: Path) -> bool:
        """Whether the buffer of `path`, analysed with this snapshot, gets what `newer` would
        give it: the same settings, limits and index on disk, and the same unsaved facts of
        the other buffers. Its own are no matter: every lint lays the facts of its text over
        the index (`ProjectIndex.with_file`). So typing in a buffer, which changes its own
        facts at nearly every keystroke, keeps its worker and the tables it computed."""
        if self is newer:
            return True
        if self.settings is not newer.settings or self.limits != newer.limits or self.disk_index is not newer.disk_index:
            return False
        if self.index is None or newer.index is None:
            return False
        from ckptlint.discovery import relative_to_root

        own = relative_to_root(path, self.settings.project_root)
        return [o for o in self.overlays if o[0] != own] == [o for o in newer.overlays if o[0] != own]


@dataclass(frozen=True)
class Task:
    """One analysis of a buffer's text: `lint`, `fix` (every safe fix, to a fixed point) or
    `facts` (what the index would hold for it: asked after its findings are published)."""

    kind: str
    text: str
    path: Path
    display: str


# --- in the worker ----------------------------------------------------------------------------

_SNAPSHOT: list[Snapshot] = []


def _install(snapshot: Snapshot) -> None:
    _SNAPSHOT[:] = [snapshot]


def _analyse(task: Task) -> Any:
    snapshot = _SNAPSHOT[0]
    settings, project, limits = snapshot.settings, snapshot.index, snapshot.limits
    if task.kind == "fix":
        fixed = fix_text(
            task.text, task.path, settings, unsafe=False, display_path=task.display, project=project, limits=limits
        )
        return fixed.text
    if task.kind == "facts":
        return buffer_facts(task.text, task.path, settings) if project is not None else None
    keep_facts = project is not None and task.path.suffix == ".py"
    outcome = lint_text(
        task.text, task.path, settings, display_path=task.display, project=project, limits=limits, keep_facts=keep_facts
    )
    diagnostics = tuple(settings.with_severities(outcome.diagnostics))  # the configuration's `severity`
    facts = None
    if outcome.facts is not None:
        from ckptlint.discovery import relative_to_root
        from ckptlint.model.syntax.names import module_name

        relative = relative_to_root(task.path, settings.project_root)
        if outcome.facts.module == module_name(relative):  # extracted as the index would name it
            facts = BufferFacts(relative, outcome.facts, exported_digest(outcome.facts))
    problems = (*unknown_noqa_codes(task.text, task.display), *outcome.internal_errors)
    return BufferLint(task.text, diagnostics, problems, facts)


def buffer_facts(text: str, path: Path, settings: Settings) -> BufferFacts | None:
    """The buffer's facts as the index extracts them from a file (`indexing._extract`);
    None for a file the index does not read."""
    from ckptlint.discovery import relative_to_root

    name = path.name.lower()
    if not name.endswith((*INDEXED_SUFFIXES, *CONFIGURATION_SUFFIXES)):
        return None
    relative = relative_to_root(path, settings.project_root)
    if name.endswith(CONFIGURATION_SUFFIXES):
        from ckptlint.model.file_facts.options import configuration_facts
        from ckptlint.model.syntax.names import module_name

        facts = configuration_facts(text, relative, module_name(relative))
    else:
        from ckptlint.model.file_facts.extraction import extract_facts

        if is_notebook_path(path):
            try:
                text = read_notebook(text).python_text
            except NotebookError:
                text = ""
        facts = extract_facts(text, relative)
    return BufferFacts(relative, facts, exported_digest(facts))


# --- in the server ----------------------------------------------------------------------------

# How long a superseded lint may take to reach a safe point (`ckptlint.cancellation`): the
# longest phase of a lint of a large file (its libcst parse, a rule's interpretation of it) is
# a few tenths of a second; past this, its worker is killed (and the next lint forks another).
CANCEL_GRACE_SECONDS = 1.0


class BufferWorker:
    """The worker process of one open buffer (see the module's docstring). `run` blocks
    its thread until the task is done, stopped at a limit, or cancelled; one task at a
    time per buffer."""

    def __init__(self, limits: AnalysisLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._pool: WorkerPool | None = None
        self._snapshot: Snapshot | None = None
        self._closed = False
        self._running: str | None = None  # the kind of the task in progress
        self._owner: object = None  # who asked for it (`run`'s `owner`)
        # Who withdrew a task still waiting for the worker (`cancel` while another runs).
        self._withdrawn: weakref.WeakSet = weakref.WeakSet()
        self._state = threading.Lock()  # over `_running`, `_owner` and `_withdrawn`
        self.forks = 0  # how many worker processes this buffer has had (for the tests)

    def run(self, snapshot: Snapshot, task: Task, owner: object = None) -> Any:
        """The task's result, or a `TaskFailure` (a limit, a crash, a cancel); None once
        the buffer is closed. `owner`: who asked (what `cancel(owner=...)` stops)."""
        with self._lock:
            if self._closed:
                return None
            with self._state:
                if owner is not None and owner in self._withdrawn:
                    self._withdrawn.discard(owner)
                    return TaskFailure("cancelled", "withdrawn before it started")
                self._running, self._owner = task.kind, owner
            try:
                if self._pool is None or not self._snapshot.serves(snapshot, task.path):
                    if self._pool is not None:
                        self._pool.close()
                    self._pool = WorkerPool(
                        _analyse, workers=1, limits=self.limits.for_workers, initializer=_install, initargs=(snapshot,)
                    )
                    self._snapshot = snapshot
                    self.forks += 1
                [outcome] = self._pool.map([task])
            finally:
                with self._state:
                    self._running, self._owner = None, None
            return outcome

    def cancel(self, *, facts_too: bool = False, owner: object = None) -> None:
        """Stop the lint in progress (its result is not wanted any more) at its next safe
        point, or kill its worker when it is not there within `CANCEL_GRACE_SECONDS`; with
        `owner`, only a task that `owner` asked for. An extraction of facts is let finish
        unless `facts_too` (the buffer is closed: the worker is killed at once)."""
        pool = self._pool
        with self._state:
            if owner is not None and self._owner is not owner:
                # Another's task runs (a superseded lint, a code action's): it is not stopped;
                # `owner`'s own task, if it still waits for the worker, never starts.
                self._withdrawn.add(owner)
                return
            running = self._running
        if pool is None:
            return
        if facts_too:
            pool.stop_busy()  # the buffer is closed: nothing of the worker is wanted
        elif running != "facts":
            # Stopped at the lint's next safe point: the worker, and what it loaded, stay.
            pool.cancel_busy(CANCEL_GRACE_SECONDS)

    def close(self) -> None:
        """Stop the worker: the buffer is closed, its memory comes back."""
        self._closed = True
        self.cancel(facts_too=True)
        with self._lock:
            if self._pool is not None:
                self._pool.close()
                self._pool = None
            self._snapshot = None


def stopped(task: Task, settings: Settings, limits: AnalysisLimits, failure: TaskFailure) -> BufferLint:
    """A lint whose worker did not return: CKPT900 with the limit it hit, as on the command
    line; a bug of ours is a problem for the log."""
    result = stopped_result(task.path, task.display, settings, limits, failure)
    return BufferLint(task.text, result.diagnostics, result.internal_errors)
