"""The projects of the buffers an editor has open: each file's settings (its config files,
found as the command line finds them for that file, under the `initializationOptions`), its
project's index (built once, refreshed when files change on disk), and the lint of a
buffer's unsaved text with them. No LSP here: the server is a shell over `EditorProjects`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ckptlint.config import CONFIG_FILES, ConfigError, Overrides, Settings, resolve_settings
from ckptlint.environment_files import ENVIRONMENT_FILE
from ckptlint.discovery import relative_to_root
from ckptlint.engine import analysis_stopped, fix_text, lint_text, unknown_noqa_codes
from ckptlint.indexing import build_index
from ckptlint.limits import AnalysisLimits
from ckptlint.model.index import ProjectIndex
from ckptlint.project_root import ROOT_MARKERS, is_project_root
from ckptlint.rule_codes import project_rule_codes
from ckptlint.types import Diagnostic

# A change to one of these can change any file's settings or declared versions.
_SETTINGS_FILES = frozenset((*CONFIG_FILES, *ROOT_MARKERS, "setup.cfg", ".gitignore"))


def _is_settings_file(path: Path) -> bool:
    return (
        path.name in _SETTINGS_FILES
        or (path.name.startswith("requirements") and path.suffix == ".txt")
        or ENVIRONMENT_FILE.match(path.name) is not None
    )


@dataclass(frozen=True)
class BufferLint:
    """One lint of a buffer: the text it read and what it found. `problems` are messages
    for the server's log (a rule's internal error, a `# noqa` naming no rule)."""

    text: str
    diagnostics: tuple[Diagnostic, ...] = ()
    problems: tuple[str, ...] = ()


class EditorProjects:
    """Settings and indexes for the files of an editor session, each computed once and
    kept until the files they were read from change. Not thread-safe: the server uses it
    from its one lint thread."""

    def __init__(self, overrides: Overrides = Overrides(), limits: AnalysisLimits = AnalysisLimits()) -> None:
        self.overrides = overrides
        self.limits = limits
        self._settings: dict[Path, Settings] = {}  # a file's directory -> its settings
        # project root -> its index, and the settings it was built with (None: not built,
        # no selected rule reads it or the directory is no project)
        self._indexes: dict[Path, tuple[ProjectIndex, Settings | None]] = {}

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

    def lint(self, text: str, path: Path) -> BufferLint:
        """The findings in a buffer's text (saved or not), with fixes, as `ckptlint` would
        report them for the file at `path` holding that text."""
        settings = self.settings_for(path)
        display = relative_to_root(path, settings.project_root)
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > self.limits.file_bytes:
            stopped = analysis_stopped(path, display, settings, self.limits.describe_size(size))
            return BufferLint(text, stopped if "checkpoint" in text else ())
        outcome = lint_text(
            text, path, settings, display_path=display, project=self.index_for(settings), limits=self.limits
        )
        diagnostics = tuple(settings.with_severities(outcome.diagnostics))
        return BufferLint(text, diagnostics, (*unknown_noqa_codes(text, display), *outcome.internal_errors))

    def fix_all(self, text: str, path: Path) -> str:
        """The buffer's text with every safe fix applied (to a fixed point)."""
        settings = self.settings_for(path)
        display = relative_to_root(path, settings.project_root)
        return fix_text(
            text, path, settings, unsafe=False, display_path=display, project=self.index_for(settings), limits=self.limits
        ).text

    def files_changed(self, changed: Iterable[Path], open_paths: Sequence[Path]) -> tuple[Path, ...]:
        """Take note of files changed on disk (saved, created, deleted); the open files whose
        findings may change with them, to lint again. A config or dependency file changes
        every setting. A Python file changes the index of its project: the project's
        other open files are linted again when what other files can observe of it changed
        (its fingerprint), not for an edit inside a function body."""
        changed = [Path(os.path.abspath(path)) for path in changed]
        if any(_is_settings_file(path) for path in changed):
            self._settings.clear()
            self._indexes.clear()
            return tuple(open_paths)
        stale_roots = []
        for root, (index, settings) in list(self._indexes.items()):
            if settings is None or not any(root in path.parents for path in changed):
                continue
            refreshed = build_index(root, settings, limits=self.limits)
            self._indexes[root] = (refreshed, settings)
            if refreshed.fingerprint != index.fingerprint:
                stale_roots.append(root)
        return tuple(
            path
            for path in open_paths
            if path not in changed and any(self._root_of(path) == root for root in stale_roots)
        )

    def _root_of(self, path: Path) -> Path | None:
        try:
            return self.settings_for(path).project_root
        except ConfigError:
            return None
