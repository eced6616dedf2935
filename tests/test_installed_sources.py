"""ckptlint over real code nobody here wrote: every Python file of the installed torch
package (about 2,300 files) is linted without an internal error. `benchmarks/bench.py`
asserts the same over torch and transformers."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.torch]


def test_the_installed_torch_sources_lint_without_internal_errors(tmp_path):
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    sources = Path(next(iter(spec.submodule_search_locations)))
    # --no-cache: nothing is written next to the installed package.
    result = subprocess.run(
        [sys.executable, "-m", "ckptlint", "check", "--no-cache", "--exit-zero", "--output-format", "json", str(sources)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "internal error" not in result.stderr, result.stderr[-4000:]
    findings = json.loads(result.stdout)
    # Whatever is reported is a well-formed diagnostic of a file that exists.
    for finding in findings:
        assert finding["code"].startswith("CKPT") and Path(finding["filename"]).is_file()
