"""The verifier's own cases on every torch release, each in a scratch virtual environment.

    python benchmarks/torch_releases.py                       # newest patch of 2.6 ... newest
    python benchmarks/torch_releases.py --releases 2.15.0 2.14.1
    python benchmarks/torch_releases.py --quick               # the fixtures' verdicts, the
                                                              # switch and script mode only

CI keeps the pinned CPU torch of the README's test command; this script is how the range
of the `runtime` extra (`torch>=2.6,<2.16` in pyproject.toml) and `TESTED_TORCH` in
`runtime_check/_switch.py` are checked. For each release it makes a virtual environment
under `--scratch`, installs that torch with this checkout (`-e .[dev]`) and transformers
(when it installs beside that torch; otherwise the Hugging Face cases skip), runs the
verifier's tests (`tests/test_verify_*.py`, distributed ones excepted: `-m "not
distributed"`), deletes the environment, and prints one table: release, installed version,
passed / failed / skipped, seconds. Exit status 1 when any release fails.

Releases come from the package index (`pip index versions torch`); releases newer than a
pip constraint on this machine (`/etc/xdg/pip`) are installed with the constraint lifted for
the scratch environment only (`PIP_CONSTRAINT=/dev/null`). A CUDA build of torch works on
CPU here; each environment takes a few GB of disk while its tests run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OLDEST = (2, 6)
TRANSFORMERS = "transformers==5.17.0"
QUICK = "fixture_verdicts or every_checkpoint_path or switch_off or reentrant or hugging_face or compiled or internals or generator"
TESTS = ["tests/test_verify_api.py", "tests/test_verify_cli.py", "tests/test_verify_scripts.py"]


@dataclass(frozen=True)
class Outcome:
    release: str
    installed: str
    passed: int
    failed: int
    skipped: int
    seconds: float
    note: str = ""


def available_releases() -> list[str]:
    """The newest patch of each minor release from OLDEST on, as the index serves them."""
    listing = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", "torch"],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_CONSTRAINT": "/dev/null"},
        check=True,
    ).stdout
    line = next(line for line in listing.splitlines() if line.startswith("Available versions:"))
    newest: dict[tuple[int, int], tuple[int, ...]] = {}
    for version in line.split(":", 1)[1].split(","):
        version = version.strip()
        if not re.fullmatch(r"\d+\.\d+\.\d+", version):
            continue  # local builds (+cpu), pre-releases
        parts = tuple(int(p) for p in version.split("."))
        minor = parts[:2]
        if minor >= OLDEST and parts > newest.get(minor, ()):
            newest[minor] = parts
    return [".".join(map(str, newest[minor])) for minor in sorted(newest, reverse=True)]


def pip(python: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *arguments],
        capture_output=True,
        text=True,
        env={**os.environ, "PIP_CONSTRAINT": "/dev/null"},
        cwd=REPO,
    )


def run_release(release: str, scratch: Path, quick: bool) -> Outcome:
    started = time.perf_counter()
    venv = scratch / f"torch-{release}"
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    note = ""
    try:
        installed = pip(python, "-e", ".[dev]", f"torch=={release}", "numpy", TRANSFORMERS)
        if installed.returncode != 0:
            note = "without transformers"
            installed = pip(python, "-e", ".[dev]", f"torch=={release}", "numpy")
        if installed.returncode != 0:
            tail = installed.stderr.strip().splitlines()[-1:] or ["pip failed"]
            return Outcome(release, "-", 0, 0, 0, time.perf_counter() - started, f"install failed: {tail[0]}")
        version = subprocess.run(
            [str(python), "-c", "import torch; print(torch.__version__)"], capture_output=True, text=True
        ).stdout.strip()
        command = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not distributed", *TESTS]
        if quick:
            command += ["-k", QUICK]
        tests = subprocess.run(command, capture_output=True, text=True, cwd=REPO)
        summary = tests.stdout.strip().splitlines()[-1] if tests.stdout.strip() else tests.stderr[-300:]
        counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|error)", summary)}
        if tests.returncode not in (0, 1) or "error" in counts:
            note = (note + "; " if note else "") + summary
        (scratch / f"torch-{release}.log").write_text(tests.stdout + tests.stderr)
        return Outcome(
            release,
            version,
            counts.get("passed", 0),
            counts.get("failed", 0) + counts.get("error", 0),
            counts.get("skipped", 0),
            time.perf_counter() - started,
            note,
        )
    finally:
        shutil.rmtree(venv, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--releases", nargs="*", help="torch versions (default: the newest patch of each minor from 2.6 on)")
    parser.add_argument("--quick", action="store_true", help="only the fixtures' verdicts, the switch and script mode")
    parser.add_argument("--scratch", type=Path, default=Path(tempfile.gettempdir()) / "ckptlint-torch-releases")
    options = parser.parse_args()
    options.scratch.mkdir(parents=True, exist_ok=True)
    releases = options.releases or available_releases()
    print(f"torch releases: {', '.join(releases)} (logs in {options.scratch})", flush=True)
    outcomes = []
    for release in releases:
        outcome = run_release(release, options.scratch, options.quick)
        outcomes.append(outcome)
        print(
            f"  {outcome.release:<8} {outcome.installed:<16} {outcome.passed:>4} passed {outcome.failed:>3} failed "
            f"{outcome.skipped:>3} skipped {outcome.seconds:>6.0f} s  {outcome.note}",
            flush=True,
        )
    print()
    print("| torch | installed | passed | failed | skipped | note |")
    print("|---|---|---|---|---|---|")
    for o in outcomes:
        print(f"| {o.release} | {o.installed} | {o.passed} | {o.failed} | {o.skipped} | {o.note} |")
    return 1 if any(o.failed or o.installed == "-" for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
