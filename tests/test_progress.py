"""The progress line of a long run (`ckptlint.progress`): drawn on a terminal's standard
error, erased before the report; never when standard error is no terminal, with -q, or for a
machine format on standard output. The runs are real `python -m ckptlint` processes with
standard error on a pseudo-terminal; "long" is `CKPTLINT_PROGRESS_DELAY=0`, so nothing
here waits for a time to pass: each test reads until the process ends."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ckptlint.progress import ProgressLine

pty = pytest.importorskip("pty")

MODEL = "from torch.utils.checkpoint import checkpoint\n\n\ndef forward(block, x):\n    return checkpoint(block, x)\n"


def project(root: Path, files: int = 3) -> Path:
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for number in range(files):
        (root / f"model_{number}.py").write_text(MODEL)
    return root


def run_on_a_terminal(root: Path, *args: str, delay: str = "0", stderr_is_terminal: bool = True) -> tuple[str, str, int]:
    """Run ckptlint with standard error on a pseudo-terminal (or a pipe); what reached
    standard output, what the terminal showed, and the exit status."""
    controller, terminal = pty.openpty()
    report = open(root.parent / f"{root.name}.stdout", "w+b")  # a file: a full pipe would stall the run
    env = {**os.environ, "CKPTLINT_PROGRESS_DELAY": delay, "TERM": "xterm", "PYTHONPATH": str(Path(__file__).parent.parent)}
    process = subprocess.Popen(
        [sys.executable, "-m", "ckptlint", *args, "--no-cache", str(root)],
        stdout=report,
        stderr=terminal if stderr_is_terminal else subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        cwd=root,
    )
    os.close(terminal)
    shown = bytearray()
    while True:
        try:
            chunk = os.read(controller, 4096)
        except OSError:  # EIO: the last holder of the terminal's other end has exited
            break
        if not chunk:
            break
        shown += chunk
    os.close(controller)
    _, err = process.communicate(timeout=600)
    if not stderr_is_terminal:
        shown += err
    report.seek(0)
    with report:
        return report.read().decode(), shown.decode("utf-8", "replace"), process.returncode


def test_a_long_run_on_a_terminal_shows_its_progress_then_erases_it(tmp_path):
    out, shown, status = run_on_a_terminal(project(tmp_path))
    assert status == 1 and out.count("CKPT001") == 3
    assert "ckptlint: " in shown and "3/3 files linted" in shown and "files indexed" in shown
    # Redrawn in place, and erased at the end: the next line starts clean.
    assert shown.startswith("\r\x1b[2K") and shown.rstrip("\r\n").endswith("\r\x1b[2K")


@pytest.mark.parametrize(
    "args, stderr_is_terminal",
    [
        (("--output-format", "json"), True),  # a machine format on standard output
        (("--output-format", "sarif"), True),
        (("-q",), True),
        ((), False),  # standard error is no terminal
    ],
)
def test_no_progress_line(tmp_path, args, stderr_is_terminal):
    out, shown, _ = run_on_a_terminal(project(tmp_path), *args, stderr_is_terminal=stderr_is_terminal)
    assert "CKPT001" in out
    assert "ckptlint: " not in shown and "\x1b[2K" not in shown


def test_a_machine_format_written_to_a_file_leaves_the_terminal_its_progress(tmp_path):
    root = project(tmp_path)
    _, shown, _ = run_on_a_terminal(root, "--output-format", "json", "-o", str(tmp_path / "report.json"))
    assert "files linted" in shown and "CKPT001" in (tmp_path / "report.json").read_text()


def test_a_short_run_draws_nothing(tmp_path):
    _, shown, _ = run_on_a_terminal(project(tmp_path), delay="1000000")
    assert "\x1b[2K" not in shown


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def extract(item):  # a function of the name the index's pool runs
    return item


extract.__name__ = "_extract"


def check(item):
    return item


def test_the_line_counts_files_across_pools_and_waits_for_its_delay():
    clock, stream = Clock(), io.StringIO()
    line = ProgressLine(stream, delay=2.0, clock=clock)
    line.task_progress(extract, 10, 100)
    assert stream.getvalue() == ""  # not yet two seconds
    clock.now = 2.5
    line.task_progress(extract, 40, 100)
    assert stream.getvalue() == "\r\x1b[2Kckptlint: 40/100 files indexed, 2 s"
    clock.now = 2.6
    line.task_progress(extract, 41, 100)
    assert stream.getvalue().count("ckptlint") == 1  # redrawn at most every quarter second
    clock.now = 3.0
    line.task_progress(extract, 100, 100)
    line.task_progress(extract, 0, 20)  # a second project's index
    clock.now = 4.0
    line.task_progress(check, 5, 120)
    assert stream.getvalue().endswith("ckptlint: 100/120 files indexed, 5/120 files linted, 4 s")
    line.finish()
    assert stream.getvalue().endswith("\r\x1b[2K")


def test_the_delay_comes_from_the_environment(monkeypatch):
    for value, expected in [("0", 0.0), ("0.5", 0.5), ("", 2.0), ("soon", 2.0), ("-1", 2.0)]:
        monkeypatch.setenv("CKPTLINT_PROGRESS_DELAY", value)
        assert ProgressLine.delay_from_environment() == expected
