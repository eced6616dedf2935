"""Asking a task in progress to stop at its next safe point, so that the process running it
lives on: the editor server's buffer worker, whose next lint then finds the tables its
last one loaded (killing it, as a limit does, costs the next lint a fork and those tables).

A worker process of `ckptlint.worker_pool` listens on a pipe to which its parent writes the
numbers of the tasks it no longer wants; `check()`, which the engine calls between the
phases of a lint (never inside one, so no cache is left half-filled), raises `Cancelled`
when the task running is among them. Numbers of tasks already finished are ignored, so a
request that arrives late never stops the next task. Outside a worker `check()` does nothing.
"""

from __future__ import annotations

import os
import struct

_NUMBER = struct.Struct("<Q")


class Cancelled(Exception):
    """The task running was superseded; raised by `check()`."""


class _Listener:
    def __init__(self) -> None:
        self.fd: int | None = None
        self.task = 0  # the number of the task running
        self.unread = b""  # part of a number (a pipe write of 8 bytes is atomic; kept for safety)


_LISTENER = _Listener()


def listen(fd: int) -> None:
    """In a worker: take cancellation requests from `fd` (the pipe's read end)."""
    os.set_blocking(fd, False)
    _LISTENER.fd, _LISTENER.task, _LISTENER.unread = fd, 0, b""


def task_started(number: int) -> None:
    """In a worker: the task numbered `number` (the n-th the worker received) starts."""
    _LISTENER.task = number


def check() -> None:
    """Raise `Cancelled` when the task running has been asked to stop."""
    fd = _LISTENER.fd
    if fd is None:
        return
    try:
        data = os.read(fd, 4096)
    except (BlockingIOError, InterruptedError):
        return
    except OSError:
        _LISTENER.fd = None
        return
    if not data:  # the parent is gone: the worker ends with its pipes, nothing to stop for
        return
    data = _LISTENER.unread + data
    whole = len(data) - len(data) % _NUMBER.size
    _LISTENER.unread = data[whole:]
    if any(number == _LISTENER.task for (number,) in _NUMBER.iter_unpack(data[:whole])):
        raise Cancelled


def request(fd: int, number: int) -> None:
    """In the parent: ask the worker listening at the other end of `fd` to stop task `number`."""
    try:
        os.write(fd, _NUMBER.pack(number))
    except (BlockingIOError, BrokenPipeError, OSError):
        pass  # a full pipe holds requests enough; a dead worker needs none
