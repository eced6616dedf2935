"""The only module that writes user files: atomically, keeping mode, never over a file that
changed on disk since it was read."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class ChangedOnDisk(Exception):
    """The file is no longer what was read; writing would lose someone else's change."""


def replace_atomically(path: Path, data: bytes, *, expected: bytes) -> None:
    """Write `data` to `path` through a temporary file in the same directory and
    `os.replace`, so readers see either the old or the new file, never a partial one."""
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
