"""The only module that writes user files: atomically, keeping mode, never over a file that
changed on disk since it was read."""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from pathlib import Path


class ChangedOnDisk(Exception):
    """The file is no longer what was read; writing would lose someone else's change."""


@contextlib.contextmanager
def interrupts_deferred():
    """SIGINT and SIGTERM wait until the block is done: an interrupt between creating the
    temporary file and renaming it (or removing it) would leave it behind."""
    if not hasattr(signal, "pthread_sigmask") or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def replace_atomically(path: Path, data: bytes, *, expected: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory and
    `os.replace`, so readers see either the old or the new file, never a partial one; an
    interrupt arriving meanwhile takes effect once the file is replaced."""
    with interrupts_deferred():
        _replace(path, data, expected)


def _replace(path: Path, data: bytes, expected: bytes) -> None:
    target = Path(os.path.realpath(path))  # a symlinked file is updated, the link kept
    current = target.read_bytes()
    if current != expected:
        raise ChangedOnDisk(f"{path}: changed on disk while ckptlint was running; not overwritten")
    mode = target.stat().st_mode & 0o7777
    descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".ckptlint-tmp", dir=target.parent)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
