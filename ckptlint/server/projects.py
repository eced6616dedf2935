"""The projects of the buffers an editor has open: each file's settings (its config files,
found as the command line finds them for that file, under the `initializationOptions`), its
project's index (built once, refreshed when files change on disk, with the open buffers'
unsaved facts laid over it), and the `Snapshot` a buffer's worker analyses its text with
(`ckptlint.server.buffers`). No LSP here: the server is a shell over `EditorProjects`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ckptlint.config import CONFIG_FILES, ConfigError, Overrides, Settings, resolve_settings
from ckptlint.declarations import LOCK_FILES
from ckptlint.environment_files import ENVIRONMENT_FILE
from ckptlint.discovery import relative_to_root
from ckptlint.engine import analysis_stopped
from ckptlint.indexing import build_index
from ckptlint.limits import AnalysisLimits
from ckptlint.model.index import ProjectIndex, with_kinds
from ckptlint.model.project.reads import ReadLog
from ckptlint.model.project.project_facts import OverlaidFacts
from ckptlint.project_root import ROOT_MARKERS, is_project_root
from ckptlint.rule_codes import project_rule_codes
from ckptlint.server.buffers import BufferFacts, BufferLint, Snapshot, Task, _analyse, _install

# A change to one of these can change any file's settings or declared versions.
_SETTINGS_FILES = frozenset((*CONFIG_FILES, *ROOT_MARKERS, *LOCK_FILES, "setup.cfg", ".gitignore"))


def _is_settings_file(path: Path) -> bool:
    return (
        path.name in _SETTINGS_FILES
        or (path.name.startswith("requirements") and path.suffix == ".txt")
        or ENVIRONMENT_FILE.match(path.name) is not None
    )


class EditorProjects:
    """Settings and indexes for the files of an editor session, each computed once and
    kept until the files they were read from change. Not thread-safe: the server uses it
    from its one index thread."""

    def __init__(self, overrides: Overrides = Overrides(), limits: AnalysisLimits = AnalysisLimits()) -> None:
        self.overrides = overrides
        self.limits = limits
        self._settings: dict[Path, Settings] = {}  # a file's directory -> its settings
        # project root -> its index, and the settings it was built with (None: not built,
        # no selected rule reads it or the directory is no project)
        self._indexes: dict[Path, tuple[ProjectIndex, Settings | None]] = {}
        # project root -> relative path -> an open buffer's unsaved facts
        self._overlays: dict[Path, dict[str, BufferFacts]] = {}
        self._snapshots: dict[tuple[Path, int], Snapshot] = {}

    def settings_for(self, path: Path) -> Settings:
        """The file's settings, as `ckptlint <path>` resolves them; a `ConfigError` for a
        config file (or option) the user must fix."""
        directory = path.parent
        if directory not in self._settings:
            self._settings[directory] = resolve_settings(path, self.overrides)
        return self._settings[directory]

    def index_for(self, settings: Settings) -> ProjectIndex:
        """The index of the file's project. A directory that is no project (no marker found
        above the file) is not walked: it could be a home directory."""
        root = settings.project_root
        if root not in self._indexes:
            is_project = is_project_root(root)
            if is_project and project_rule_codes() & settings.enabled_codes:
                self._indexes[root] = (build_index(root, settings, limits=self.limits), settings)
            else:
                self._indexes[root] = (ProjectIndex(root), None)
        return self._indexes[root][0]

    def display(self, path: Path, settings: Settings) -> str:
        return relative_to_root(path, settings.project_root)

    def snapshot_for(self, path: Path) -> Snapshot:
        """What the buffer of `path` is analysed with: its settings and its project's index,
        with the other open buffers' unsaved facts (one snapshot object while nothing it
        holds changes: see `BufferWorker`)."""
        settings = self.settings_for(path)
        root = settings.project_root
        index = self.index_for(settings)
        built = self._indexes[root][1] is not None
        key = (root, id(settings))
        snapshot = self._snapshots.get(key)
        if snapshot is None:
            overlays = tuple(sorted((relative, facts.exported) for relative, facts in self._overlays.get(root, {}).items()))
            snapshot = Snapshot(
                settings, self._overlaid(root, index) if built else None, self.limits, disk_index=index, overlays=overlays
            )
            self._snapshots[key] = snapshot
        return snapshot

    def too_large(self, text: str, path: Path) -> BufferLint | None:
        """A buffer over the size limit is not analysed, as on the command line (CKPT900 when
        it mentions checkpointing)."""
        size = len(text.encode("utf-8", "surrogatepass"))
        limit = self.limits.bytes_for(path)
        if size <= limit:
            return None
        settings = self.settings_for(path)
        stopped = analysis_stopped(path, self.display(path, settings), settings, self.limits.describe_size(size, limit))
        return BufferLint(text, stopped if "checkpoint" in text else ())

    def lint(self, text: str, path: Path) -> BufferLint:
        """The findings in a buffer's text, analysed in this process (without the limits the
        server's workers enforce): as `ckptlint` would report them for the file at `path`
        holding that text."""
        return self.too_large(text, path) or self._here("lint", text, path)

    def fix_all(self, text: str, path: Path) -> str:
        """The buffer's text with every safe fix applied (to a fixed point), in this process."""
        return self._here("fix", text, path)

    def _here(self, kind: str, text: str, path: Path):
        snapshot = self.snapshot_for(path)
        _install(snapshot)
        return _analyse(Task(kind, text, path, self.display(path, snapshot.settings)))

    # --- the open buffers' unsaved facts --------------------------------------------------

    def buffer_facts(self, path: Path, facts: BufferFacts) -> bool:
        """Lay a buffer's facts over its project's index. True when other files can observe
        the change (its exported digest differs from what the index had for it): the
        project's other open buffers are then linted again."""
        root = self.root_of(path)
        if root is None or root not in self._indexes or self._indexes[root][1] is None:
            return False
        overlays = self._overlays.setdefault(root, {})
        before = self._exported(root, facts.relative)
        if before == facts.exported:
            return False
        overlays[facts.relative] = facts
        self._invalidate(root)
        return True

    def buffer_closed(self, path: Path) -> bool:
        """The buffer's unsaved facts leave the index: what is on disk counts again. True
        when that changes what other files observe."""
        root = self.root_of(path)
        if root is None or root not in self._overlays:
            return False
        relative = relative_to_root(path, root)
        facts = self._overlays[root].pop(relative, None)
        if facts is None:
            return False
        self._invalidate(root)
        return facts.exported != self._exported(root, relative)

    def _exported(self, root: Path, relative: str) -> str | None:
        overlay = self._overlays.get(root, {}).get(relative)
        if overlay is not None:
            return overlay.exported
        index = self._indexes[root][0]
        return (index.exported or {}).get(relative)

    def _overlaid(self, root: Path, index: ProjectIndex) -> ProjectIndex:
        overlays = self._overlays.get(root)
        if not overlays:
            return index
        files = index.files
        files_with = index.files_with
        for relative, overlay in sorted(overlays.items()):
            files = OverlaidFacts(files, relative, overlay.facts)
            files_with = with_kinds(files_with, relative, overlay.facts)
        # The digests are those of the files on disk: an overlaid file's facts are not theirs.
        digests = {relative: digest for relative, digest in index.digests.items() if relative not in overlays}
        # A log, for the tables the workers derive to say what they read (`ProjectIndex.inherited_table`).
        return ProjectIndex(root, files, digests, files_with=files_with, read_log=ReadLog())

    def _invalidate(self, root: Path | None = None) -> None:
        if root is None:
            self._snapshots.clear()
        else:
            for key in [key for key in self._snapshots if key[0] == root]:
                del self._snapshots[key]

    # --- files changed on disk, settings changed ------------------------------------------

    def reset(self, overrides: Overrides | None = None) -> None:
        """Forget every setting and index (the client's settings changed): read again at the
        next lint. The open buffers' unsaved facts stay."""
        if overrides is not None:
            self.overrides = overrides
        self._settings.clear()
        self._indexes.clear()
        self._invalidate()

    def files_changed(self, changed: Iterable[Path], open_paths: Sequence[Path]) -> tuple[Path, ...]:
        """Take note of files changed on disk (saved, created, deleted); the open files whose
        findings may change with them, to lint again. A config or dependency file changes
        every setting. A Python file changes the index of its project: the project's
        other open files are linted again when what other files can observe of it changed
        (its fingerprint), not for an edit inside a function body."""
        changed = [Path(os.path.abspath(path)) for path in changed]
        if any(_is_settings_file(path) for path in changed):
            self.reset()
            return tuple(open_paths)
        stale_roots = []
        for root, (index, settings) in list(self._indexes.items()):
            if settings is None or not any(root in path.parents for path in changed):
                continue
            refreshed = build_index(root, settings, limits=self.limits)
            self._indexes[root] = (refreshed, settings)
            if refreshed.fingerprint != index.fingerprint:
                self._invalidate(root)
                stale_roots.append(root)
        return tuple(
            path
            for path in open_paths
            if path not in changed and any(self.root_of(path) == root for root in stale_roots)
        )

    def root_of(self, path: Path) -> Path | None:
        try:
            return self.settings_for(path).project_root
        except ConfigError:
            return None
