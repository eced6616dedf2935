"""Worker processes whose limits hold for native code.

libcst's parser is native code that holds the GIL, and it is super-linear on some shapes
(long operator, attribute and call chains): no thread, signal handler or asynchronous
exception can stop it. So each file's analysis runs in a forked worker process; the parent
only hands out work and waits, and stops a worker the moment one of its files passes the
time limit or its memory passes the memory limit (SIGKILL: native code included). That file
becomes a `TaskFailure`, the worker is replaced, and the other files go on. A worker that
dies (a native crash, the kernel's OOM killer) fails only the file it held.

Workers never write user files: a killed worker can leave nothing half-written. They die
with the parent (PR_SET_PDEATHSIG where Linux offers it; otherwise at the end of their
file, when they find their task pipe closed) and ignore SIGINT, which a terminal sends to
the whole process group: the parent decides what an interrupt stops.

Built on `os.fork` and pipes rather than `multiprocessing` (25 ms to import, and no way to
stop a single task of its pools). Where `os.fork` is missing (Windows) the tasks run in the
calling process, without the limits.
"""

from __future__ import annotations

import gc
import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ckptlint import cancellation

# How often a busy worker's memory is sampled.
_MEMORY_POLL_SECONDS = 0.1
# A worker whose memory stays above this share of the limit between files is replaced: what
# one file left behind (fragmentation) must not count against the next.
_RECYCLE_SHARE = 0.5
_HEADER = struct.Struct("<Q")
# A worker's young-generation collection threshold (objects allocated and not yet freed).
_YOUNG_OBJECTS = 100_000
# A worker's reply for a task it stopped when asked (`cancel_busy`).
_CANCELLED = "ckptlint: cancelled"

# Told of each pool's progress, when set (`ckptlint.progress`): `task_listener(function,
# done, total)` after each finished task and at each wait, in the thread that runs `map`.
task_listener: Callable[[Callable[[Any], Any], int, int], None] | None = None


@dataclass(frozen=True)
class Limits:
    """What one task (one file) may take: wall-clock seconds, and the worker's own memory
    in bytes (memory not shared with the parent; None: not bounded)."""

    seconds: float
    memory_bytes: int | None = None


@dataclass(frozen=True)
class TaskFailure:
    """A task that returned nothing: stopped at a limit ("time", "memory"), its worker died
    ("crash"), the function raised ("error", with the traceback as `detail`), or it stopped
    when asked to (`cancel_busy`: "cancelled")."""

    kind: str
    detail: str


class _Worker:
    def __init__(self, pid: int, tasks: int, results: int, cancels: int) -> None:
        self.pid = pid
        self.tasks = tasks  # write end: task messages to the worker
        self.results = results  # read end: results from the worker
        self.cancels = cancels  # write end: numbers of the tasks to stop (`ckptlint.cancellation`)
        self.sent = 0  # how many tasks it was given: the number of the one it holds
        self.index: int | None = None  # the item it holds
        self.started = 0.0
        # Resident memory when forked: the parent's pages, shared until written. What the
        # worker holds beyond it is what its work costs.
        self.baseline = resident_memory(pid) or 0
        self.memory_checked = 0.0

    def memory_used(self) -> int | None:
        resident = resident_memory(self.pid)
        return None if resident is None else max(0, resident - self.baseline)

    def fds(self) -> tuple[int, int, int]:
        return (self.tasks, self.results, self.cancels)


def _send(fd: int, payload: Any) -> None:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


def _receive(fd: int) -> Any:
    """One message; EOFError when the writer is gone before a whole message arrived."""
    (length,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    return pickle.loads(_read_exactly(fd, length))


def _read_exactly(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def resident_memory(pid: int) -> int | None:
    """Bytes of `pid` resident in memory (from /proc, a 20 µs read; None without it)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as handle:
            return int(handle.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def workers_for(sizes: Sequence[int], jobs: int | None, *, min_files: int, min_bytes: int) -> int:
    """How many workers a batch of files is worth: `jobs` (default: the cores) from
    `min_files` files or `min_bytes` bytes on (a few large files are as much work as many
    small ones), else one: below that a second process costs more than it saves."""
    if len(sizes) >= min_files or sum(sizes) >= min_bytes:
        return jobs or os.cpu_count() or 1
    return 1


class WorkerPool:
    """`map(items)` runs `function(item)` for each item in up to `workers` processes and
    returns the results in order, a `TaskFailure` in place of each task that did not return.

    `initializer(*initargs)` runs in each worker before its first task. `while_busy` runs
    once in this process, after the workers have their first tasks: work that would
    otherwise wait for them (on a machine of two or more cores it runs on one the first
    worker does not use, and the processes forked later inherit what it did; never in a
    thread, which a fork could copy halfway through an import). The pool is a context manager; leaving it (an
    interrupt included) stops every worker at once."""

    def __init__(
        self,
        function: Callable[[Any], Any],
        *,
        workers: int,
        limits: Limits,
        initializer: Callable[..., None] | None = None,
        initargs: tuple = (),
        while_busy: Callable[[], None] | None = None,
    ) -> None:
        self.function = function
        self.workers = max(1, workers)
        self.limits = limits
        self.initializer = initializer
        self.initargs = initargs
        self.while_busy = while_busy
        self._live: list[_Worker] = []

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close(graceful=exc_info[0] is None)

    def map(self, items: Sequence[Any], *, weights: Sequence[int] | None = None) -> list[Any]:
        """With `weights` (a task's expected cost, e.g. its file's size), the heaviest
        tasks are handed out first, so that no worker starts a large file when the others
        are about to finish; the results stay in the order of `items`."""
        if not hasattr(os, "fork"):  # no worker processes: the tasks run here, after the initializer
            if self.initializer is not None:
                self.initializer, initializer = None, self.initializer
                initializer(*self.initargs)
            return [self._run_here(item) for item in items]
        results: list[Any] = [None] * len(items)
        order = range(len(items))
        if weights is not None:
            order = sorted(order, key=lambda index: -weights[index])  # stable: ties keep their order
        queue = deque(order)
        busy: dict[int, _Worker] = {}  # results fd -> worker
        idle = [worker for worker in self._live if worker.index is None]
        while queue or busy:
            while queue and (idle or len(self._live) < self.workers):
                worker = idle.pop() if idle else self._spawn()
                index = queue.popleft()
                try:
                    _send(worker.tasks, items[index])
                except OSError:  # it died while idle: start another for this item
                    self._discard(worker)
                    queue.appendleft(index)
                    continue
                worker.index, worker.started = index, time.monotonic()
                worker.sent += 1
                busy[worker.results] = worker
            if not busy:
                continue
            if self.while_busy is not None:
                self.while_busy, while_busy = None, self.while_busy
                _with_interrupts_held(while_busy)
            now = time.monotonic()
            timeout = min(worker.started + self.limits.seconds for worker in busy.values()) - now
            if self.limits.memory_bytes is not None:
                timeout = min(timeout, _MEMORY_POLL_SECONDS)
            if task_listener is not None:
                task_listener(self.function, len(items) - len(queue) - len(busy), len(items))
            readable, _, _ = select.select(list(busy), [], [], max(0.0, timeout))
            for fd in readable:
                worker = busy.pop(fd)
                index, worker.index = worker.index, None
                try:
                    ok, value = _receive(fd)
                except (EOFError, OSError, pickle.UnpicklingError):
                    results[index] = TaskFailure("crash", self._reap(worker))
                    continue
                if ok:
                    results[index] = value
                else:
                    results[index] = TaskFailure("cancelled", "") if value == _CANCELLED else TaskFailure("error", value)
                if self._holds_too_much(worker):
                    self._discard(worker)
                else:
                    idle.append(worker)
            now = time.monotonic()
            for fd, worker in list(busy.items()):
                if now - worker.started >= self.limits.seconds:
                    results[worker.index] = TaskFailure("time", f"{self.limits.seconds:g} s")
                elif self._over_memory(worker, now):
                    results[worker.index] = TaskFailure("memory", f"{self.limits.memory_bytes >> 20} MiB")
                else:
                    continue
                del busy[fd]
                self._discard(worker)
        if task_listener is not None and items:
            task_listener(self.function, len(items), len(items))
        return results

    def stop_busy(self) -> None:
        """Kill the workers holding a task now (from another thread: a task whose result
        nobody wants any more). `map` reports their tasks as crashed and goes on."""
        for worker in list(self._live):
            if worker.index is not None:
                try:
                    os.kill(worker.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def cancel_busy(self, grace_seconds: float) -> None:
        """Ask the workers holding a task now to stop it at its next safe point
        (`ckptlint.cancellation`: from another thread, a task whose result nobody wants any
        more); `map` reports it as "cancelled" and the worker serves the next task. A worker
        still on that task `grace_seconds` later (inside a long phase, or in native code) is
        killed, as by `stop_busy`."""
        for worker in list(self._live):
            if worker.index is None:
                continue
            number = worker.sent
            cancellation.request(worker.cancels, number)
            timer = threading.Timer(grace_seconds, self._kill_if_still, (worker, number))
            timer.daemon = True
            timer.start()

    def _kill_if_still(self, worker: _Worker, number: int) -> None:
        if worker in self._live and worker.index is not None and worker.sent == number:
            try:
                os.kill(worker.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _run_here(self, item: Any) -> Any:
        try:
            return self.function(item)
        except Exception:
            return TaskFailure("error", traceback.format_exc())

    def _over_memory(self, worker: _Worker, now: float) -> bool:
        if self.limits.memory_bytes is None or now - worker.memory_checked < _MEMORY_POLL_SECONDS:
            return False
        worker.memory_checked = now
        used = worker.memory_used()
        return used is not None and used > self.limits.memory_bytes

    def _holds_too_much(self, worker: _Worker) -> bool:
        if self.limits.memory_bytes is None:
            return False
        used = worker.memory_used()
        return used is not None and used > self.limits.memory_bytes * _RECYCLE_SHARE

    def _spawn(self) -> _Worker:
        # Pools in other threads (the server's one per buffer) fork too: a fork between this
        # os.pipe() and the parent closing the worker's ends would give that other worker a
        # copy of this one's result pipe's write end, and `map` would then never see EOF when
        # this worker is killed (`stop_busy`): it waited out the whole time limit.
        with _SPAWN_LOCK:
            return self._spawn_locked()

    def _spawn_locked(self) -> _Worker:
        task_read, task_write = os.pipe()
        result_read, result_write = os.pipe()
        cancel_read, cancel_write = os.pipe()
        parent = os.getpid()
        inherited = [fd for worker in self._live for fd in worker.fds()]
        # Objects the worker only reads stay shared with the parent: no collection in the
        # worker walks them (and so copies their pages).
        gc.freeze()
        # No interrupt between the fork and the worker's registration: a worker the pool
        # does not know of would outlive an interrupted run (until its parent-death signal).
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
        try:
            pid = os.fork()
        except BaseException:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
            raise
        finally:
            if os.getpid() == parent:
                gc.unfreeze()
        if pid == 0:  # the worker
            status = 1
            try:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
                os.close(task_write)
                os.close(result_read)
                os.close(cancel_write)
                for fd in inherited:  # the other workers' pipes: their ends must close with them
                    os.close(fd)
                cancellation.listen(cancel_read)
                _serve(self.function, task_read, result_write, parent, self.initializer, self.initargs)
                status = 0
            finally:
                os._exit(status)
        try:
            os.close(task_read)
            os.close(result_write)
            os.close(cancel_read)
            os.set_blocking(cancel_write, False)  # a request never blocks the thread making it
            worker = _Worker(pid, task_write, result_read, cancel_write)
            self._live.append(worker)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a pending interrupt is raised here
        return worker

    def _reap(self, worker: _Worker) -> str:
        """Collect a worker that died on its own; say how."""
        self._live.remove(worker)
        for fd in worker.fds():
            _close(fd)
        try:
            _, status = os.waitpid(worker.pid, 0)
        except ChildProcessError:
            return "the worker process ended"
        if os.WIFSIGNALED(status):
            number = os.WTERMSIG(status)
            try:
                name = signal.Signals(number).name
            except ValueError:
                name = f"signal {number}"
            return f"the worker process was killed by {name}"
        return f"the worker process exited with status {os.WEXITSTATUS(status)}"

    def _discard(self, worker: _Worker) -> None:
        _stop(worker)  # then forgotten: an interrupt in between still finds it live
        self._live.remove(worker)

    def close(self, *, graceful: bool = True) -> None:
        """Stop every worker: idle ones are told to exit, and all are killed unless they
        have. After an interrupt or error nothing is waited for."""
        try:
            for worker in self._live:
                if graceful and worker.index is None:
                    _close(worker.tasks)  # end of input: the worker exits
            while self._live:
                worker = self._live[0]
                if graceful and worker.index is None and _exited_within(worker.pid, 1.0):
                    _close(worker.results)
                    _close(worker.cancels)
                else:
                    _stop(worker)
                self._live.pop(0)
        except BaseException:  # interrupted while closing: the rest are killed, not waited for
            while self._live:
                _stop(self._live.pop())
            raise


_INTERRUPTS = frozenset({signal.SIGINT, signal.SIGTERM})
# One worker made at a time in this process, whichever pool and thread makes it (`_spawn`).
_SPAWN_LOCK = threading.Lock()


def _with_interrupts_held(function: Callable[[], None]) -> None:
    """Run `function` with SIGINT / SIGTERM delivered only after it: raised inside an
    import, an interrupt could leave the interpreter to end by the signal, not with 128 +
    the signal. In the main thread the signals are caught and raised again afterwards (a
    signal mask holds them for this thread only, and the kernel may hand a process's signal
    to another thread, whose Python handler then runs here at once); elsewhere, or where a
    handler was not set from Python, this thread's signal mask holds them."""
    previous = {number: signal.getsignal(number) for number in _INTERRUPTS}
    if threading.current_thread() is not threading.main_thread() or None in previous.values():
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, _INTERRUPTS)
        try:
            function()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return
    caught: list[int] = []
    for number in sorted(_INTERRUPTS):
        signal.signal(number, lambda received, frame: caught.append(received))
    try:
        function()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in dict.fromkeys(caught):
            signal.raise_signal(number)


def _stop(worker: _Worker) -> None:
    """Kill a worker now (SIGKILL: native code included) and collect it."""
    for fd in worker.fds():
        _close(fd)
    try:
        os.kill(worker.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        os.waitpid(worker.pid, 0)
    except ChildProcessError:
        pass


def _exited_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.002)


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def _serve(function, tasks: int, results: int, parent: int, initializer, initargs) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _die_with(parent)
    # A task builds a syntax tree of a few hundred thousand objects that mostly dies with
    # it, freed by reference counting; at Python's default threshold (700) the collector
    # runs thousands of times per large file, and its older generations re-walk the growing
    # tree (a fifth of a large file's lint). Cycles left behind are still collected, later.
    gc.set_threshold(_YOUNG_OBJECTS, *gc.get_threshold()[1:])
    if initializer is not None:
        initializer(*initargs)
    number = 0
    while True:
        try:
            item = _receive(tasks)
        except EOFError:
            return
        number += 1
        cancellation.task_started(number)
        try:
            reply = (True, function(item))
        except cancellation.Cancelled:
            reply = (False, _CANCELLED)
        except Exception:
            reply = (False, traceback.format_exc())
        try:
            _send(results, reply)
        except (pickle.PicklingError, TypeError, AttributeError):
            _send(results, (False, traceback.format_exc()))


def _die_with(parent: int) -> None:
    """Ask the kernel to kill this worker when the parent dies (Linux), so that a worker
    stuck in native code never outlives a parent killed with SIGKILL."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(1)
