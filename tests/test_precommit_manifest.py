"""The pre-commit manifest validates and keeps the flags pre-commit needs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

MANIFEST = Path(__file__).resolve().parent.parent / ".pre-commit-hooks.yaml"


def test_manifest_validates_with_pre_commit():
    pytest.importorskip("pre_commit")
    result = subprocess.run(
        [sys.executable, "-m", "pre_commit", "validate-manifest", str(MANIFEST)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_hooks_are_serial_and_force_exclude():
    hooks = {hook["id"]: hook for hook in yaml.safe_load(MANIFEST.read_text())}
    assert sorted(hooks) == ["ckptlint", "ckptlint-fix"]
    for hook in hooks.values():
        assert hook["require_serial"] is True
        assert "--force-exclude" in hook["entry"].split()
    assert "--fix" in hooks["ckptlint-fix"]["entry"].split()
    assert "--fix" not in hooks["ckptlint"]["entry"].split()
