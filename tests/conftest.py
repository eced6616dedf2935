from __future__ import annotations

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
    """The in-process runs must not depend on the colour settings of the shell running pytest."""
    for name in ("FORCE_COLOR", "CLICOLOR_FORCE", "NO_COLOR"):
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
