"""The one-line progress indicator of a long run on a terminal.

A cold run of a large repository spends minutes indexing and linting; without a sign of
life it reads as a hang. So a run on a terminal draws, on standard error, once it has
lasted `CKPTLINT_PROGRESS_DELAY` seconds (default 2):

    ckptlint: 1,204/2,681 files indexed, 0/312 linted, 14 s

redrawn in place (`\\r` and erase-line) at most every `_REDRAW_SECONDS`, and erased when the
run ends, so the report that follows starts on a clean line. Nothing is drawn when standard
error is not a terminal, with `-q` / `-s`, or when a machine format (JSON, SARIF, ...) goes
to standard output: the caller decides (`ProgressLine.wanted`).

The counts come from the worker pools (`ckptlint.worker_pool.task_listener`): the index's
extraction and the lint each run their files in one, and the pool reports after each
file and while it waits, so the line ticks without a thread of its own (a thread could be
copied by a worker's fork in the middle of a write).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from ckptlint import worker_pool

DEFAULT_DELAY_SECONDS = 2.0
_REDRAW_SECONDS = 0.25
_ERASE = "\r\x1b[2K"

# The worker functions whose tasks are files indexed, and files linted.
_INDEXING = frozenset({"_extract"})


class ProgressLine:
    def __init__(self, stream: TextIO, *, delay: float = DEFAULT_DELAY_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.delay = delay
        self.clock = clock
        self.started = clock()
        self.last_drawn: float | None = None
        self.drawn = False
        # stage -> (files finished in earlier pools, the current pool's done and total)
        self.counts: dict[str, list[int]] = {"indexed": [0, 0, 0], "linted": [0, 0, 0]}

    @staticmethod
    def wanted(*, quiet: bool, machine_output_on_stdout: bool, stream: TextIO = sys.stderr) -> bool:
        try:
            is_terminal = stream.isatty()
        except (AttributeError, ValueError):
            return False
        return is_terminal and not quiet and not machine_output_on_stdout and os.environ.get("TERM") != "dumb"

    @staticmethod
    def delay_from_environment() -> float:
        text = os.environ.get("CKPTLINT_PROGRESS_DELAY", "").strip()
        try:
            value = float(text) if text else DEFAULT_DELAY_SECONDS
        except ValueError:
            return DEFAULT_DELAY_SECONDS
        return value if value >= 0 else DEFAULT_DELAY_SECONDS

    # --- what the pools say --------------------------------------------------------------

    def task_progress(self, function: Callable[[Any], Any], done: int, total: int) -> None:
        stage = "indexed" if getattr(function, "__name__", "") in _INDEXING else "linted"
        counts = self.counts[stage]
        if done < counts[1] or total != counts[2]:  # a new pool of this stage: the last one's files are finished
            counts[0] += counts[1]
        counts[1], counts[2] = done, total
        self.tick(finished=done == total)

    def tick(self, *, finished: bool = False) -> None:
        """Redraw, at most every `_REDRAW_SECONDS` (and when a pool has finished: its
        last count stays on the line while the next stage starts)."""
        now = self.clock()
        if now - self.started < self.delay:
            return
        if self.last_drawn is not None and now - self.last_drawn < _REDRAW_SECONDS and not finished:
            return
        self.last_drawn = now
        self._write(_ERASE + self.render(now))
        self.drawn = True

    def render(self, now: float | None = None) -> str:
        elapsed = (self.clock() if now is None else now) - self.started
        parts = []
        for stage, (before, done, total) in self.counts.items():
            if before + total:
                parts.append(f"{before + done:,}/{before + total:,} files {stage}")
        return f"ckptlint: {', '.join(parts) or 'finding files'}, {elapsed:.0f} s"

    def finish(self) -> None:
        if self.drawn:
            self._write(_ERASE)
            self.drawn = False

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass

    # --- as a context ---------------------------------------------------------------------

    def __enter__(self) -> ProgressLine:
        self._previous = worker_pool.task_listener
        worker_pool.task_listener = self.task_progress
        return self

    def __exit__(self, *exc_info) -> None:
        worker_pool.task_listener = self._previous
        self.finish()
