from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckptlint.cli import main


@pytest.fixture(autouse=True)
def _no_colour_overrides(monkeypatch):
    """The in-process runs must not depend on the colour settings (or docs URL) of the shell running pytest."""
    for name in ("FORCE_COLOR", "CLICOLOR_FORCE", "NO_COLOR", "CKPTLINT_DOCS_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def make_project(tmp_path: Path):
    """Write `{relative path: source}` under a fresh project root (with a pyproject.toml)."""

    def make(files: dict[str, str | bytes], pyproject: str = "[project]\nname = 'demo'\n") -> Path:
        (tmp_path / "pyproject.toml").write_text(pyproject)
        for relative, content in files.items():
            path = tmp_path / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(textwrap.dedent(content).lstrip("\n"))
        return tmp_path

    return make


@pytest.fixture
def cli(monkeypatch):
    """Run the CLI in-process (click's runner) from `cwd`; returns the click Result."""

    def run(args: list[str], cwd: Path, input: str | bytes | None = None):
        monkeypatch.chdir(cwd)
        return CliRunner().invoke(main, args, input=input, catch_exceptions=False)

    return run


def json_findings(result, root: Path, *, with_message: bool = False) -> list[tuple]:
    """(path relative to root, row, column, code[, message]) from a `--output-format json` run."""
    assert "Traceback" not in result.stderr, result.stderr
    return [
        (Path(os.path.relpath(d["filename"], root)).as_posix(), d["location"]["row"], d["location"]["column"], d["code"])
        + ((d["message"],) if with_message else ())
        for d in json.loads(result.stdout)
    ]


def run_subprocess(args: list[str], cwd: Path, input: bytes | None = None) -> subprocess.CompletedProcess:
    """Run `python -m ckptlint` as a real process, as a user or pre-commit would."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "CLICOLOR_FORCE")}
    return subprocess.run(
        [sys.executable, "-m", "ckptlint", *args],
        cwd=cwd,
        input=input,
        capture_output=True,
        env=env,
        timeout=120,
    )


class CallLog:
    """What a patched function was called with, kept in a file: the engine runs in forked
    worker processes, whose calls a list in the test process would never see."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.write_text("")

    def record(self, key: str) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(key + "\n")

    def calls(self) -> list[str]:
        return self.path.read_text(encoding="utf-8").splitlines()

    def clear(self) -> None:
        self.path.write_text("")

    def __iter__(self):
        return iter(self.calls())

    def __len__(self) -> int:
        return len(self.calls())

    def __eq__(self, other) -> bool:
        return self.calls() == list(other)

    def __repr__(self) -> str:
        return repr(self.calls())


@pytest.fixture
def record_calls(monkeypatch, tmp_path_factory):
    """`record_calls(module, "name", key)` patches `module.name` to log `key(*args)` of each
    call, in whichever process it happens; returns the `CallLog`."""

    def install(module, name: str, key) -> CallLog:
        log = CallLog(tmp_path_factory.mktemp("calls") / f"{name}.log")
        original = getattr(module, name)

        def recording(*args, **kwargs):
            log.record(key(*args, **kwargs))
            return original(*args, **kwargs)

        monkeypatch.setattr(module, name, recording)
        return log

    return install
