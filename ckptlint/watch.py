"""`ckptlint --watch`: lint again whenever a linted file, a directory walked or the
configuration changes. Polls the stat of what the last run read (no file-system events, no
dependency); a stat that changed, appeared or vanished starts the next run."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from ckptlint.config import CONFIG_FILES, ROOT_MARKERS, Settings
from ckptlint.declarations import LOCK_FILES
from ckptlint.discovery import discover, stat_key

POLL_SECONDS = 0.5


def _stat(path: str) -> list[int] | None:
    try:
        return stat_key(os.stat(path))
    except OSError:
        return None


def snapshot(paths: Iterable[str]) -> dict[str, list[int] | None]:
    return {path: _stat(path) for path in paths}


def watched_paths(paths: Sequence[Path], settings: Settings, *, force_exclude: bool = False) -> list[str]:
    """What a run over `paths` depends on: every file it lints, every directory it walks
    (a file added or removed changes its directory), the .gitignore files it read, the
    configuration and the project's declarations."""
    found = discover(
        paths,
        project_root=settings.project_root,
        exclude=settings.exclude,
        extend_exclude=settings.extend_exclude,
        respect_gitignore=settings.respect_gitignore,
        force_exclude=force_exclude,
        include=settings.include,
    )
    root = settings.project_root
    names = {*ROOT_MARKERS, *CONFIG_FILES, *LOCK_FILES, "requirements.txt"}
    extra = [str(root / name) for name in sorted(names)]
    if settings.config_file is not None:
        extra.append(str(settings.config_file))
    return sorted({*found.absolute, *found.depends_on, *extra})


def watch(
    run: Callable[[], object],
    watched: Callable[[], Iterable[str]],
    *,
    interval: float = POLL_SECONDS,
    stop: threading.Event | None = None,
    on_change: Callable[[Mapping[str, object]], None] = lambda changed: None,
) -> None:
    """Run `run`, then again each time a path of `watched()` (asked before each run, so that
    a change made while it runs is seen) changes its stat, until `stop` is set. `on_change`
    gets the paths that changed, before the run they start."""
    stop = stop or threading.Event()
    state = snapshot(watched())
    run()
    while not stop.wait(interval):
        current = snapshot(state)
        if current == state:
            continue
        on_change({path: current[path] for path in current if current[path] != state[path]})
        state = snapshot(watched())
        run()
