"""A rule is a folder: copied into `rules/` under a new code and slug and registered by
`python -m ckptlint.docs` (the command that writes the docs), it is documented, selectable
and run, and its cases run by its code; before that command it is not selectable, so its own
cases (which go through selection) fail."""

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


def _copy_of_a_rule_folder(root: Path, slug: str, code: str, name: str, new_slug: str, new_code: str, new_name: str) -> int:
    """`rules/<slug>/` copied whole as `rules/<new_slug>/` (its modules, its cases, their
    markers and fixed files) under a new code and name; returns how many cases it holds."""
    rules = root / "ckptlint" / "rules"
    shutil.copytree(rules / slug, rules / new_slug, ignore=shutil.ignore_patterns("__pycache__"))
    module = rules / new_slug / "rule.py"
    template = module.read_text(encoding="utf-8")
    new_rule = template.replace(f'code = "{code}"', f'code = "{new_code}"').replace(f'name = "{name}"', f'name = "{new_name}"')
    assert new_rule != template
    module.write_text(new_rule, encoding="utf-8")
    cases = sorted((rules / new_slug / "cases").iterdir())
    for case in cases:
        case.write_text(case.read_text(encoding="utf-8").replace(f"# expect: {code}", f"# expect: {new_code}"), encoding="utf-8")
    return sum(case.suffix == ".py" for case in cases)


def test_a_new_rule_folder_is_registered_by_the_docs_command(tmp_path):
    root = _copy_of_the_project(tmp_path)
    cases = _copy_of_a_rule_folder(
        root, "checkpoint_implicit_reentrant", "CKPT001", "checkpoint-implicit-reentrant", "my_new_rule", "CKPT099", "my-new-rule"
    )
    (root / "tests").mkdir()
    shutil.copy(REPOSITORY / "tests" / "test_rule_cases.py", root / "tests" / "test_rule_cases.py")
    (root / "model.py").write_text(
        "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n", encoding="utf-8"
    )
    assert _run(root, "-c", "import ckptlint; print(ckptlint.__file__)").stdout.startswith(str(root))
    run_cases = ("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_rule_cases.py", "-k", "CKPT099")

    # Found, but not registered: not selectable (so its cases fail), not documented.
    unregistered = _run(root, "-m", "ckptlint", "check", "--select", "CKPT099", "--no-cache", "model.py")
    assert unregistered.returncode == 2 and "unknown rule code or prefix 'CKPT099'" in unregistered.stderr
    assert not (root / "docs" / "rules" / "CKPT099.md").exists()
    failing = _run(root, *run_cases)
    assert failing.returncode == 1 and f"{cases} failed" in failing.stdout, failing.stdout[-2000:]

    generated = _run(root, "-m", "ckptlint.docs", str(root))
    assert generated.returncode == 0, generated.stderr
    assert 'RuleSummary("CKPT099", "my-new-rule", True, Applicability.UNSAFE, Severity.WARNING)' in (
        root / "ckptlint" / "rule_manifest.py"
    ).read_text(encoding="utf-8")
    assert (root / "docs" / "rules" / "CKPT099.md").is_file()
    assert "[CKPT099](docs/rules/CKPT099.md)" in (root / "README.md").read_text(encoding="utf-8")

    page = _run(root, "-m", "ckptlint", "rule", "CKPT099")
    assert page.returncode == 0 and page.stdout.startswith("# my-new-rule (CKPT099)")
    assert "rules/my_new_rule/cases/" in page.stdout and page.stdout == (root / "docs" / "rules" / "CKPT099.md").read_text()
    selected = _run(root, "-m", "ckptlint", "check", "--select", "CKPT099", "--no-cache", "model.py")
    assert selected.returncode == 1, selected.stderr
    assert "model.py:2:5: CKPT099" in selected.stdout
    # Its cases run by code: each case, and the checks of the rule and its folder.
    passing = _run(root, *run_cases)
    assert passing.returncode == 0 and f"{cases + 2} passed" in passing.stdout, passing.stdout[-2000:]
