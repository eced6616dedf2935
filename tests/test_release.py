"""Release hygiene: one version and one home, written once and read everywhere else."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ckptlint import __version__
from ckptlint.types import REPOSITORY_URL

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO_ROOT = Path(__file__).resolve().parent.parent
README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))
SOURCE = "import torch.utils.checkpoint as cp\ny = cp.checkpoint(f, x)\n"


def precommit_snippet() -> dict:
    block = re.search(r"```yaml\n# \.pre-commit-config\.yaml\n(.*?)```", README, re.DOTALL)
    assert block, "the README's pre-commit snippet"
    [repo] = yaml.safe_load(block.group(1))["repos"]
    return repo


def test_the_readme_pins_the_hook_at_this_version():
    """`rev:` is the tag `v` + `__version__`, so the snippet works as written once tagged."""
    repo = precommit_snippet()
    assert repo["rev"] == f"v{__version__}"
    assert re.fullmatch(r"v\d+\.\d+\.\d+", repo["rev"])
    assert repo["repo"] == REPOSITORY_URL
    assert [hook["id"] for hook in repo["hooks"]] == ["ckptlint"]


def test_the_version_is_written_once():
    assert PYPROJECT["project"]["dynamic"] == ["version"]
    assert "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "ckptlint.__version__"}


def test_the_home_is_written_once():
    assert PYPROJECT["project"]["urls"] == {
        "Repository": REPOSITORY_URL,
        "Documentation": f"{REPOSITORY_URL}/blob/main/docs/rules",
    }
    hosts = {match.rstrip("/.") for match in re.findall(r"https://github\.com/ckptlint/[\w./-]*", README)}
    assert hosts == {REPOSITORY_URL}, "the README names another home"


def test_the_hooks_receive_notebooks():
    hooks = yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())
    assert all("jupyter" in hook["types_or"] for hook in hooks)


def test_finding_urls_come_from_the_one_home(cli, make_project):
    root = make_project({"m.py": SOURCE})
    [item] = json.loads(cli(["m.py", "--output-format", "json"], cwd=root).stdout)
    assert item["url"] == f"{REPOSITORY_URL}/blob/main/docs/rules/CKPT001.md"
    sarif = json.loads(cli(["m.py", "--output-format", "sarif"], cwd=root).stdout)
    driver = sarif["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == REPOSITORY_URL
    assert {rule["helpUri"] for rule in driver["rules"]} == {
        f"{REPOSITORY_URL}/blob/main/docs/rules/{rule['id']}.md" for rule in driver["rules"]
    }


def test_the_docs_url_can_point_elsewhere(cli, make_project, monkeypatch):
    root = make_project({"m.py": SOURCE})
    cli(["m.py"], cwd=root)  # cached with the default URL
    monkeypatch.setenv("CKPTLINT_DOCS_URL", "https://docs.example.test/ckptlint/{code}.html")
    [item] = json.loads(cli(["m.py", "--output-format", "json"], cwd=root).stdout)
    assert item["url"] == "https://docs.example.test/ckptlint/CKPT001.html"  # not the cached one
    rules = json.loads(cli(["m.py", "--output-format", "sarif"], cwd=root).stdout)["runs"][0]["tool"]["driver"]["rules"]
    assert rules[0]["helpUri"] == f"https://docs.example.test/ckptlint/{rules[0]['id']}.html"
    page = json.loads(cli(["rule", "CKPT032", "--output-format", "json"], cwd=root).stdout)
    assert page["url"] == "https://docs.example.test/ckptlint/CKPT032.html"


def test_a_docs_url_without_the_code_is_refused(cli, make_project, monkeypatch):
    root = make_project({"m.py": SOURCE})
    monkeypatch.setenv("CKPTLINT_DOCS_URL", "https://docs.example.test/ckptlint/")
    result = cli(["m.py"], cwd=root)
    assert result.exit_code == 2
    assert result.stderr == (
        "error: CKPTLINT_DOCS_URL='https://docs.example.test/ckptlint/': give an http(s):// or file:// URL with "
        f"`{{code}}` where the rule code goes, e.g. {REPOSITORY_URL}/blob/main/docs/rules/{{code}}.md\n"
    )


CI_DOC = (REPO_ROOT / "docs" / "ci.md").read_text(encoding="utf-8")


def yaml_blocks(text: str, first_line: str) -> list[dict]:
    return [yaml.safe_load(block) for block in re.findall(rf"```yaml\n({re.escape(first_line)}.*?)```", text, re.DOTALL)]


def test_every_release_the_docs_name_is_this_version():
    """The pre-commit `rev:`, the Action's `@v`, the wheel's name and the tag of the release
    steps, in the README and docs/ci.md: all `__version__`, the tag the release procedure makes."""
    for text in (README, CI_DOC):
        tags = re.findall(r"(?:rev: |@|ref: |git tag |origin )(v\d+\.\d+\.\d+)", text)
        assert tags and set(tags) == {f"v{__version__}"}
    assert f"dist/ckptlint-{__version__}-py3-none-any.whl" in CI_DOC


def test_the_pre_commit_snippets_validate(tmp_path):
    pytest.importorskip("pre_commit")
    configs = yaml_blocks(CI_DOC, "# .pre-commit-config.yaml")
    assert [config["repos"][0]["repo"] for config in configs] == [REPOSITORY_URL, "local"]
    assert configs[0]["repos"] == [precommit_snippet()]  # the README's, repeated
    for number, config in enumerate(configs):
        path = tmp_path / f"config{number}.yaml"
        path.write_text(yaml.safe_dump(config))
        result = subprocess.run([sys.executable, "-m", "pre_commit", "validate-config", str(path)], capture_output=True, text=True)
        assert result.returncode == 0, result.stdout + result.stderr
    local = configs[1]["repos"][0]["hooks"][0]
    manifest = {hook["id"]: hook for hook in yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert {key: local[key] for key in ("entry", "types_or", "require_serial")} == {
        key: manifest["ckptlint"][key] for key in ("entry", "types_or", "require_serial")
    }
