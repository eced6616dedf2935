"""A rule is a folder: dropped into `rules/` and registered by `python -m ckptlint.docs`
(the command that writes the docs), it is documented, selectable and run; before that
command it is not selectable, so its own cases (which go through selection) fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parent.parent


def _copy_of_the_project(tmp_path: Path) -> Path:
    """The package as the source tree holds it, importable from `tmp_path` (the rule pack
    is `ckptlint.rules`, as installed)."""
    root = tmp_path / "project"
    root.mkdir()
    shutil.copytree(REPOSITORY / "ckptlint", root / "ckptlint", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPOSITORY / "rules", root / "ckptlint" / "rules", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPOSITORY / "docs", root / "docs")
    shutil.copy(REPOSITORY / "README.md", root / "README.md")
    (root / "pyproject.toml").write_text("[project]\nname = 'copy'\n")
    return root


def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    env.pop("FORCE_COLOR", None)
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_a_new_rule_module_is_registered_by_the_docs_command(tmp_path):
    root = _copy_of_the_project(tmp_path)
    template = (root / "ckptlint" / "rules" / "checkpoint_implicit_reentrant" / "rule.py").read_text(encoding="utf-8")
    new_rule = template.replace("class CheckpointImplicitReentrant(", "class MyNewRule(").replace(
        'code = "CKPT001"', 'code = "CKPT099"'
    ).replace('name = "checkpoint-implicit-reentrant"', 'name = "my-new-rule"')
    assert new_rule != template
    (root / "ckptlint" / "rules" / "my_new_rule").mkdir()
    (root / "ckptlint" / "rules" / "my_new_rule" / "__init__.py").write_text("", encoding="utf-8")
    (root / "ckptlint" / "rules" / "my_new_rule" / "rule.py").write_text(new_rule, encoding="utf-8")
    (root / "model.py").write_text(
        "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n", encoding="utf-8"
    )
    assert _run(root, "-c", "import ckptlint; print(ckptlint.__file__)").stdout.startswith(str(root))

    # Found, but not registered: not selectable (so its cases fail), not documented.
    unregistered = _run(root, "-m", "ckptlint", "check", "--select", "CKPT099", "--no-cache", "model.py")
    assert unregistered.returncode == 2 and "unknown rule code or prefix 'CKPT099'" in unregistered.stderr
    assert not (root / "docs" / "rules" / "CKPT099.md").exists()

    generated = _run(root, "-m", "ckptlint.docs", str(root))
    assert generated.returncode == 0, generated.stderr
    assert 'RuleSummary("CKPT099", "my-new-rule", True, Applicability.UNSAFE)' in (
        root / "ckptlint" / "rule_manifest.py"
    ).read_text(encoding="utf-8")
    assert (root / "docs" / "rules" / "CKPT099.md").is_file()
    assert "[CKPT099](docs/rules/CKPT099.md)" in (root / "README.md").read_text(encoding="utf-8")

    page = _run(root, "-m", "ckptlint", "rule", "CKPT099")
    assert page.returncode == 0 and page.stdout.startswith("# my-new-rule (CKPT099)")
    selected = _run(root, "-m", "ckptlint", "check", "--select", "CKPT099", "--no-cache", "model.py")
    assert selected.returncode == 1, selected.stderr
    assert "model.py:2:5: CKPT099" in selected.stdout
