"""The worker pool's limits hold for native code: a task past the time limit (in libcst's
native parser, which holds the GIL), a worker past the memory limit, a worker that crashes
or a task that raises fail that task alone; the other tasks run, in order, and no worker
outlives the pool."""

from __future__ import annotations

import os
import signal
import threading
import sys

import pytest

from ckptlint.worker_pool import Limits, TaskFailure, WorkerPool, workers_for

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="workers are forked processes")

# Quadratic in libcst's native parser: does not finish in minutes.
NATIVE_HANG = "y = " + "+".join(["1"] * 20000) + "\n"


def task(item):
    kind, value = item
    if kind == "double":
        return value * 2
    if kind == "native":
        import libcst

        libcst.parse_module(NATIVE_HANG)
    if kind == "memory":
        held = [bytearray(1 << 20) for _ in range(value)]
        signal.pause()  # holds the memory until killed
        return len(held)
    if kind == "crash":
        import faulthandler

        faulthandler.disable()  # pytest's handler, inherited: it would print the "crash"
        os.kill(os.getpid(), signal.SIGSEGV)
    if kind == "raise":
        raise ValueError(f"bad item {value}")
    if kind == "pid":
        return os.getpid()
    if kind in ("checking", "spinning", "checks-then-returns"):
        from pathlib import Path

        from ckptlint import cancellation

        Path(value).write_text("started")
        if kind == "checks-then-returns":
            for _ in range(100):
                cancellation.check()
            return "done"
        while True:
            if kind == "checking":
                cancellation.check()
    if kind == "clock":  # when the task started
        import time

        return time.monotonic_ns()
    raise AssertionError(kind)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("workers", [1, 3])
def test_results_come_back_in_order(workers):
    items = [("double", n) for n in range(50)]
    with WorkerPool(task, workers=workers, limits=Limits(60)) as pool:
        assert pool.map(items) == [n * 2 for n in range(50)]
        assert pool.map([("double", 7)]) == [14]  # a pool serves several maps


def test_the_heaviest_tasks_are_handed_out_first():
    weights = [3, 50, 7, 50, 1]
    with WorkerPool(task, workers=1, limits=Limits(60)) as pool:
        started = pool.map([("clock", n) for n in range(5)], weights=weights)
    # In input order; run by weight, the largest first (ties in input order).
    assert sorted(range(5), key=started.__getitem__) == [1, 3, 2, 0, 4]


@pytest.mark.parametrize("workers", [1, 2])
def test_while_busy_runs_once_in_the_parent_while_workers_run(workers):
    """`while_busy` runs once, here, while the first tasks run (the workers are already
    forked: they do not see what it does), with one worker too (an edited file extracted
    again while the parent imports what its lint needs)."""
    ran = []
    with WorkerPool(task, workers=workers, limits=Limits(60), while_busy=lambda: ran.append(os.getpid())) as pool:
        assert pool.map([("double", n) for n in range(10)]) == [n * 2 for n in range(10)]
        pool.map([("double", 1)])
    assert ran == [os.getpid()]


def test_an_interrupt_waits_until_while_busy_is_done():
    """An interrupt raised inside `while_busy` (an import, in the run's parent) could leave
    the interpreter to end by the signal instead of with 128 + the signal: it is delivered
    after, and the pool stops as for any interrupt."""
    done = []

    def busy() -> None:
        os.kill(os.getpid(), signal.SIGINT)
        done.append("after the signal")

    # Another thread that does not hold the signal: the kernel may hand it the process's
    # signal (a mask set in the main thread alone would not hold it back then).
    stop = threading.Event()
    bystander = threading.Thread(target=stop.wait, daemon=True)
    bystander.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            with WorkerPool(task, workers=2, limits=Limits(60), while_busy=busy) as pool:
                pool.map([("double", n) for n in range(4)])
    finally:
        stop.set()
        bystander.join()
    assert done == ["after the signal"]


@pytest.mark.parametrize(
    ("sizes", "workers"),
    [([100] * 63, 1), ([100] * 64, 4), ([300_000, 100], 4), ([100_000, 100], 1), ([], 1)],
)
def test_workers_for_many_files_or_many_bytes(sizes, workers):
    assert workers_for(sizes, 4, min_files=64, min_bytes=256 << 10) == workers


@pytest.mark.parametrize("workers", [1, 2])
def test_native_code_past_the_time_limit_fails_that_task_alone(workers):
    items = [("double", 1), ("native", 0), ("double", 2), ("native", 0), ("double", 3)]
    with WorkerPool(task, workers=workers, limits=Limits(0.5)) as pool:
        results = pool.map(items)
    assert results[0::2] == [2, 4, 6]
    assert results[1] == results[3] == TaskFailure("time", "0.5 s")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="memory is read from /proc")
def test_a_worker_past_the_memory_limit_is_stopped():
    with WorkerPool(task, workers=1, limits=Limits(60, 64 << 20)) as pool:
        results = pool.map([("memory", 200), ("double", 5)])
    assert results == [TaskFailure("memory", "64 MiB"), 10]


def test_a_crash_or_an_exception_fails_that_task_alone():
    with WorkerPool(task, workers=1, limits=Limits(60)) as pool:
        crashed, doubled, raised = pool.map([("crash", 0), ("double", 4), ("raise", 9)])
    assert crashed == TaskFailure("crash", "the worker process was killed by SIGSEGV")
    assert doubled == 8
    assert raised.kind == "error" and "ValueError: bad item 9" in raised.detail


def test_no_worker_outlives_the_pool():
    with WorkerPool(task, workers=2, limits=Limits(0.5)) as pool:
        pids = set(pool.map([("pid", 0)] * 10))
        pool.map([("native", 0)])
    assert pids and not any(alive(pid) for pid in pids)


def test_an_interrupt_stops_every_worker():
    """Leaving the pool by an exception (Ctrl-C in the parent) kills the busy workers too."""
    pool = WorkerPool(task, workers=2, limits=Limits(600))
    pids = set(pool.map([("pid", 0)] * 4))
    with pytest.raises(KeyboardInterrupt):
        with pool:
            previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
            try:
                signal.setitimer(signal.ITIMER_REAL, 0.3)
                pool.map([("native", 0), ("native", 0)])  # both workers in native code
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
    assert not any(alive(pid) for pid in pids)


_INSTALLED: list[int] = []


def _install(value: int) -> None:
    _INSTALLED.append(value)


def _installed(item):
    return (_INSTALLED[-1] if _INSTALLED else None, item)


def test_without_fork_the_tasks_run_here_after_the_initializer(monkeypatch):
    # Windows has no fork: the tasks run in this process, and what the initializer installs
    # (the run's project indexes) must be there for them as it is in a worker.
    monkeypatch.delattr(os, "fork")
    monkeypatch.setattr(sys.modules[__name__], "_INSTALLED", [])
    with WorkerPool(_installed, workers=3, limits=Limits(60), initializer=_install, initargs=(7,)) as pool:
        assert pool.map([1, 2]) == [(7, 1), (7, 2)]
        assert pool.map([3]) == [(7, 3)]
    assert _INSTALLED == [7]  # once per pool, as once per worker


def _when_started(marker, then):
    """Run `then()` in a thread once the task has written `marker` (an event, not a delay)."""
    def wait():
        while not marker.exists():
            threading.Event().wait(0.005)
        then()

    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread


def test_a_cancelled_task_stops_at_its_next_check_and_its_worker_serves_the_next(tmp_path):
    marker = tmp_path / "started"
    with WorkerPool(task, workers=1, limits=Limits(seconds=600)) as pool:
        [pid] = pool.map([("pid", 0)])
        _when_started(marker, lambda: pool.cancel_busy(grace_seconds=600))
        assert pool.map([("checking", str(marker))]) == [TaskFailure("cancelled", "")]
        assert pool.map([("pid", 0)]) == [pid]  # the same process


def test_a_request_for_a_finished_task_does_not_stop_the_next(tmp_path):
    from ckptlint import cancellation

    with WorkerPool(task, workers=1, limits=Limits(seconds=600)) as pool:
        assert pool.map([("double", 1)]) == [2]
        [worker] = pool._live
        cancellation.request(worker.cancels, worker.sent)  # too late: task 1 is done
        assert pool.map([("checks-then-returns", str(tmp_path / "started"))]) == ["done"]


def test_a_task_that_never_reaches_a_check_is_killed_after_the_grace(tmp_path):
    marker = tmp_path / "started"
    with WorkerPool(task, workers=1, limits=Limits(seconds=600)) as pool:
        [pid] = pool.map([("pid", 0)])
        _when_started(marker, lambda: pool.cancel_busy(grace_seconds=0.05))
        [failure] = pool.map([("spinning", str(marker))])
        assert failure.kind == "crash"
        assert not alive(pid)
        assert pool.map([("double", 2)]) == [4]  # a new worker
