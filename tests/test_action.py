"""The GitHub Action (action.yml, composite, as Ruff's ruff-action): its inputs, and its
run script (action/run.sh) run here as the action's step runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
SCRIPT = REPO_ROOT / "action" / "run.sh"
PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.1']\n"
MODEL = "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\nz = checkpoint(block, x, mask=m)\n"


def test_the_action_is_composite_with_the_inputs_of_ruff_action():
    action = yaml.safe_load((REPO_ROOT / "action.yml").read_text())
    assert action["runs"]["using"] == "composite"
    inputs = action["inputs"]
    assert {name: inputs[name]["default"] for name in inputs} == {"version": "checkout", "args": "", "src": "."}
    [step] = action["runs"]["steps"]
    assert step["run"] == 'bash "$GITHUB_ACTION_PATH/action/run.sh"'
    assert step["env"] == {
        "CKPTLINT_VERSION": "${{ inputs.version }}",
        "CKPTLINT_ARGS": "${{ inputs.args }}",
        "CKPTLINT_SRC": "${{ inputs.src }}",
    }


def run_action(workspace: Path, tmp_path: Path, **inputs: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CKPTLINT_", "FORCE_COLOR", "CLICOLOR_FORCE"))}
    env.update({f"CKPTLINT_{name.upper()}": value for name, value in inputs.items()}, RUNNER_TEMP=str(tmp_path))
    return subprocess.run(["bash", str(SCRIPT)], cwd=workspace, env=env, capture_output=True, text=True, timeout=900)


@pytest.fixture
def workspace(tmp_path) -> Path:
    """A checked-out repository, the project in a subdirectory of it."""
    root = tmp_path / "workspace"
    (root / ".git").mkdir(parents=True)
    (root / "ml").mkdir()
    (root / "ml" / "pyproject.toml").write_text(PYPROJECT)
    (root / "ml" / "model.py").write_text(MODEL)
    (root / "ml" / "clean.py").write_text("x = 1\n")
    return root


def test_the_script_annotates_findings_relative_to_the_repository_and_fails_the_step(workspace, tmp_path):
    result = run_action(workspace, tmp_path, python=sys.executable, src="ml", args="--no-cache --select CKPT001")
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "::warning title=ckptlint (CKPT001),file=ml/model.py,line=2,col=5,endLine=2,endColumn=25::CKPT001 `checkpoint` "
        "without `use_reentrant`: torch falls back to the reentrant implementation and its warning cannot point at "
        "this line; pass `use_reentrant=False`"
    )
    # CKPT032 not selected: the second call is CKPT001 too (nothing supersedes it).
    assert [line.split(",")[1:3] for line in lines] == [["file=ml/model.py", "line=2"], ["file=ml/model.py", "line=3"]]
    clean = run_action(workspace, tmp_path, python=sys.executable, src="ml/clean.py  ml/pyproject.toml", args="--no-cache")
    assert (clean.returncode, clean.stdout) == (0, "")


def test_the_args_can_choose_another_format(workspace, tmp_path):
    result = run_action(workspace / "ml", tmp_path, python=sys.executable, args="--no-cache --output-format json-lines -q")
    assert result.returncode == 1
    assert [line.split('"code":"')[1][:7] for line in result.stdout.splitlines()] == ["CKPT001", "CKPT032"]


@pytest.mark.slow
def test_the_script_installs_ckptlint_from_the_checkout(workspace, tmp_path):
    """The default `version: checkout`: the action's own repository, installed in a new
    virtual environment (what `uses: ckptlint/ckptlint@v0.1.0` runs)."""
    result = run_action(workspace, tmp_path, src="ml", args="--no-cache")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"::group::Install ckptlint ({REPO_ROOT})"
    assert lines[1] == "::endgroup::"
    assert [line.split(",")[1] for line in lines[2:]] == ["file=ml/model.py", "file=ml/model.py"]


def test_the_workflow_in_the_docs_uses_the_action_with_its_inputs():
    from ckptlint import __version__

    action = yaml.safe_load((REPO_ROOT / "action.yml").read_text())
    doc = (REPO_ROOT / "docs" / "ci.md").read_text()
    workflow = yaml.safe_load(doc.split("```yaml\n# .github/workflows/ckptlint.yml\n", 1)[1].split("```", 1)[0])
    steps = workflow["jobs"]["ckptlint"]["steps"]
    [ours] = [step for step in steps if step.get("uses", "").startswith("ckptlint/ckptlint@")]
    assert ours["uses"] == f"ckptlint/ckptlint@v{__version__}"
    assert set(ours["with"]) <= set(action["inputs"])
