"""Real-process tests: concurrent runs sharing a cache, concurrent `--fix` runs, interrupted
`--fix` runs (SIGINT/SIGTERM) and an unwritable cache directory."""

from __future__ import annotations

import ast
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_subprocess

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and permissions")

FINDING = (
    "from torch.utils.checkpoint import checkpoint\n"
    "def f(self, h, m):\n"
    "    h = checkpoint(self.layer, h)\n"
    "    return checkpoint(self.layer, h, attention_mask=m)\n"
)
FIXED = (
    "from torch.utils.checkpoint import checkpoint\n"
    "def f(self, h, m):\n"
    "    h = checkpoint(self.layer, h, use_reentrant=False)\n"
    "    return checkpoint(self.layer, h, attention_mask=m, use_reentrant=False)\n"
)
CLEAN = "def g(x):\n    return x + 1\n"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}


def _popen(args: list[str], cwd: Path, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ckptlint", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(),
        **kwargs,
    )


def _run_all(commands: list[list[str]], cwd: Path) -> list[tuple[int, bytes, bytes]]:
    """Start every command at once, then collect (exit code, stdout, stderr) of each."""
    processes = [_popen(args, cwd) for args in commands]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=120)
        results.append((process.returncode, out, err))
    return results


def _make(root: Path, count: int = 40) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    package = root / "pkg"
    package.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        (package / f"m{index:02d}.py").write_text(FINDING if index % 2 == 0 else CLEAN)
    return root


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".ckptlint-tmp") or p.suffix == ".tmp"]


def _cache_files(cache: Path) -> list[Path]:
    return sorted(cache.rglob("*.json"))


def _reference(root: Path) -> bytes:
    done = run_subprocess(["check", ".", "--output-format", "json", "--no-cache"], root)
    assert done.returncode == 1, done.stderr.decode()
    return done.stdout


# --------------------------------------------------------------------------------------------
# 1. concurrent runs sharing one cache


def test_concurrent_runs_share_the_cache_and_agree(tmp_path: Path) -> None:
    root = _make(tmp_path / "project")
    cache = tmp_path / "cache"
    args = ["check", ".", "--output-format", "json", "--cache-dir", str(cache)]
    for round_ in range(2):
        if round_:
            # Modify files between runs: the cache must not hand back stale results.
            for index in range(round_, 40, 3):
                path = root / "pkg" / f"m{index:02d}.py"
                path.write_text(CLEAN if index % 2 == 0 and round_ == 1 else FINDING + f"# edit {round_}\n")
        expected = _reference(root)
        findings = json.loads(expected)
        assert findings, "the project must have findings"
        assert {(d["code"], d["location"]["row"], d["location"]["column"]) for d in findings} == {
            ("CKPT001", 3, 9),
            ("CKPT032", 4, 12),
        }
        results = _run_all([args] * 4, root)
        for code, out, err in results:
            assert b"Traceback" not in err, err.decode()
            assert code == 1, err.decode()
            assert out == expected
        # The cache is valid JSON afterwards and a further (cached) run agrees.
        files = _cache_files(cache)
        assert files
        for file in files:
            assert isinstance(json.loads(file.read_text(encoding="utf-8")), dict)
        again = run_subprocess(args, root)
        assert again.returncode == 1 and again.stdout == expected
        assert not _temp_files(root) and not _temp_files(cache)


# --------------------------------------------------------------------------------------------
# 2. concurrent --fix runs


def test_concurrent_fix_runs_never_corrupt_files(tmp_path: Path) -> None:
    root = _make(tmp_path / "project")
    cache = tmp_path / "cache"
    args = ["check", ".", "--fix", "--unsafe-fixes", "--cache-dir", str(cache)]
    results = _run_all([args] * 3, root)
    for code, _out, err in results:
        text = err.decode()
        assert "Traceback" not in text, text
        # A file another run fixed first is reported (changed on disk), never overwritten.
        assert code in (0, 2), text
        for line in text.splitlines():
            assert "changed on disk" in line, text
    for index in range(40):
        source = (root / "pkg" / f"m{index:02d}.py").read_text()
        ast.parse(source)
        assert source == (FIXED if index % 2 == 0 else CLEAN)
        for line in source.splitlines():
            assert line.count("use_reentrant") <= 1
    final = run_subprocess(["check", ".", "--output-format", "json", "--cache-dir", str(cache)], root)
    assert final.returncode == 0, final.stderr.decode()
    assert json.loads(final.stdout) == []
    assert not _temp_files(root)


# --------------------------------------------------------------------------------------------
# 3. interrupted --fix


def _large_source(index: int, blocks: int) -> str:
    body = [f"# module {index}\nfrom torch.utils.checkpoint import checkpoint\n"]
    for block in range(blocks):
        body.append(
            f"def f{block}(self, h, m):\n"
            f"    h = checkpoint(self.layer, h)\n"
            f"    return checkpoint(self.layer, h, attention_mask=m)\n"
        )
    return "".join(body)


@pytest.fixture(scope="module")
def large_project(tmp_path_factory) -> tuple[Path, dict[str, bytes], dict[str, bytes]]:
    """80 files (enough for the process pool) with 16 findings each: (template, originals, fixed).
    Fixing is slow enough (~0.1 s a file) that a signal after 0.5-1.5 s lands mid-run."""
    root = tmp_path_factory.mktemp("large") / "template"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    for index in range(80):
        (root / "pkg" / f"big{index:03d}.py").write_text(_large_source(index, 8))
    originals = {p.name: p.read_bytes() for p in (root / "pkg").iterdir()}
    fixed_root = root.parent / "fixed"
    shutil.copytree(root, fixed_root)
    done = run_subprocess(["check", ".", "--fix", "--unsafe-fixes", "--no-cache"], fixed_root)
    assert done.returncode == 0, done.stderr.decode()
    fixed = {p.name: p.read_bytes() for p in (fixed_root / "pkg").iterdir()}
    assert all(fixed[name] != originals[name] for name in originals)
    return root, originals, fixed


def _children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (the run's worker processes)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_for(condition, what: str):
    """Poll until `condition()` holds: waiting for an event, not for a time. (The bound
    only turns a hang into a failure.)"""
    for _ in range(60_000):
        value = condition()
        if value:
            return value
        time.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


@pytest.mark.parametrize("to_group", [False, True], ids=["process", "group"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_fix_leaves_every_file_old_or_new(large_project, tmp_path: Path, signum, to_group) -> None:
    template, originals, fixed = large_project
    # Interrupted while the workers analyse, and again once fixes are being written.
    for attempt, moment in enumerate(("analysing", "writing")):
        root = tmp_path / f"run{attempt}"
        shutil.copytree(template, root)
        # A new session: signalling the group is what Ctrl-C in a terminal does.
        process = _popen(["check", ".", "--fix", "--unsafe-fixes", "--no-cache"], root, start_new_session=True)
        if moment == "analysing":
            _wait_for(lambda: _children(process.pid) or process.poll() is not None, "a worker process")
        else:
            _wait_for(
                lambda: process.poll() is not None
                or any((root / "pkg" / name).read_bytes() != original for name, original in originals.items()),
                "a fixed file",
            )
        workers = _children(process.pid)
        if to_group:
            os.killpg(process.pid, signum)
        else:
            process.send_signal(signum)
        _out, err = process.communicate(timeout=120)
        text = err.decode(errors="replace")
        assert "Traceback" not in text, text
        if process.returncode != 0:  # a run that finished before the signal exits 0
            assert process.returncode == 128 + signum, text
            assert text.endswith("ckptlint: interrupted\n"), text
        assert not any(_alive(pid) for pid in workers)
        states = {"old": 0, "new": 0}
        for name, original in originals.items():
            current = (root / "pkg" / name).read_bytes()
            assert current in (original, fixed[name]), f"{name} is neither the original nor the fixed file"
            states["old" if current == original else "new"] += 1
        assert not _temp_files(root), _temp_files(root)
        shutil.rmtree(root)


NATIVE_STALL = "from torch.utils.checkpoint import checkpoint\n" + ("y = f" + "(a)" * 950 + "\n") * 200


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_a_run_whose_worker_is_in_native_code(tmp_path: Path, signum) -> None:
    """libcst's parser holds the GIL for minutes on this file: the run still ends at the
    signal, with 128 + the signal number, its workers killed and its cache intact."""
    root = _make(tmp_path / "project", count=4)
    (root / "pkg" / "stall.py").write_text(NATIVE_STALL)
    cache = tmp_path / "cache"
    process = _popen(["check", ".", "--cache-dir", str(cache)], root)
    workers = _wait_for(lambda: _children(process.pid), "a worker process")
    process.send_signal(signum)
    _out, err = process.communicate(timeout=120)
    assert (process.returncode, err) == (128 + signum, b"ckptlint: interrupted\n")
    assert not any(_alive(pid) for pid in workers)
    for file in _cache_files(cache):
        assert isinstance(json.loads(file.read_text(encoding="utf-8")), dict)
    assert not _temp_files(root) and not _temp_files(cache)


# --------------------------------------------------------------------------------------------
# 4. unwritable cache directory


def test_cache_dir_that_is_a_file_still_lints(tmp_path: Path) -> None:
    root = _make(tmp_path / "project", count=10)
    expected = _reference(root)
    blocker = tmp_path / "cache"
    blocker.write_text("not a directory\n")
    for _ in range(2):
        done = run_subprocess(["check", ".", "--output-format", "json", "--cache-dir", str(blocker)], root)
        assert b"Traceback" not in done.stderr, done.stderr.decode()
        assert done.returncode == 1 and done.stdout == expected
    assert blocker.read_text() == "not a directory\n"
    # The default location blocked by a file is no different.
    (root / ".ckptlint_cache").write_text("")
    done = run_subprocess(["check", ".", "--output-format", "json"], root)
    assert done.returncode == 1 and done.stdout == expected, done.stderr.decode()


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores permissions")
def test_read_only_cache_dir_still_lints(tmp_path: Path) -> None:
    root = _make(tmp_path / "project", count=10)
    expected = _reference(root)
    cache = tmp_path / "cache"
    args = ["check", ".", "--output-format", "json", "--cache-dir", str(cache)]
    assert run_subprocess(args, root).stdout == expected  # populate it
    for directory in [cache, *[p for p in cache.rglob("*") if p.is_dir()]]:
        directory.chmod(0o500)
    try:
        (root / "pkg" / "m01.py").write_text(FINDING)  # forces a cache write
        expected = _reference(root)
        done = run_subprocess(args, root)
        assert b"Traceback" not in done.stderr, done.stderr.decode()
        assert done.returncode == 1 and done.stdout == expected
    finally:
        for directory in [cache, *[p for p in cache.rglob("*") if p.is_dir()]]:
            directory.chmod(0o700)
