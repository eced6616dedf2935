"""The fixture driver: every `.py` under `fixtures/` is linted and must produce exactly the
findings its `# expect: CODE` markers announce, and its fixes must behave.

Markers sit on the line where a diagnostic starts (for a call, the line where the call
starts); several codes on one line are separated by commas. See fixtures/README.md.
"""

from __future__ import annotations

import ast
import difflib
import functools
import io
import json
import tokenize
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from ckptlint.cli import main
from ckptlint.config import Settings, tomllib
from ckptlint.engine import fix_text, lint_text
from ckptlint.indexing import Projects
from ckptlint.model.index import ProjectIndex
from ckptlint.types import Applicability
from ckptlint.registry import all_rules
from ckptlint.rule_cases import marked_codes, python_markers
from ckptlint.rule_codes import all_codes

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURES = REPO_ROOT / "fixtures"
FIXTURE_FILES = sorted(FIXTURES.rglob("*.py"))
# Training recipes and launch scripts: markers are `# expect:` comments too. JSON has no
# comments: a JSON fixture's findings are listed beside it, in `NAME.json.expect` (one
# `ROW CODE[,CODE]` per line; `#` starts a comment).
RECIPE_FIXTURES = sorted(p for p in FIXTURES.rglob("*") if p.suffix in (".yaml", ".yml", ".json", ".sh"))
# Notebooks: markers are `# expect:` comments in code cells, on the reported row of the cell;
# a finding's file is `path:cell N` (N counts every cell, markdown too).
NOTEBOOK_FIXTURES = sorted(FIXTURES.rglob("*.ipynb"))
# Codes whose findings carry a fix: every one of them must be fixed away by `--unsafe-fixes`.
FIXED_CODES = {rule.code for rule in all_rules() if rule.fix is not None}
REPOSITORY_EXCLUDES = tuple(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["ckptlint"]["extend-exclude"])


def settings() -> Settings:
    # An explicit target so the results do not depend on the torch installed here; the
    # repository's excludes (the rule folders' cases), as a run over `fixtures/` reads them.
    return replace(Settings.default(REPO_ROOT, target_versions={"torch": "2.13"}), extend_exclude=REPOSITORY_EXCLUDES)


@functools.lru_cache(maxsize=None)
def _projects() -> Projects:
    return Projects(settings(), use_cache=False)


def project_of(path: Path) -> tuple[Settings, ProjectIndex]:
    """The fixture's project as a run over `fixtures/` sees it: a directory with its own
    pyproject.toml is a project of its own, with its declared versions and its own index."""
    root = _projects().root_of(path)
    return _projects().settings_for(root), _projects().index_for(root)


def relative(path: Path) -> str:
    return path.relative_to(REPO_ROOT).as_posix()


def comments(text: str) -> list[str]:
    """The comments of a file, in order (strings that look like comments are not)."""
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [token.string for token in tokens if token.type == tokenize.COMMENT]


def expected_findings(path: Path) -> set[tuple[str, int, str]]:
    found = set()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        for number, cell in enumerate(json.loads(text)["cells"], start=1):
            source = "".join(cell["source"]) if cell["cell_type"] == "code" else ""
            for row, line in enumerate(source.splitlines(), start=1):
                found.update((f"{relative(path)}:cell {number}", row, code) for code in marked_codes(line))
        return found
    if path.suffix == ".json":
        listed = path.with_name(path.name + ".expect")
        lines = listed.read_text(encoding="utf-8").splitlines() if listed.is_file() else []
        for line in lines:
            row, _, codes = line.partition("#")[0].strip().partition(" ")
            found.update((relative(path), int(row), code.strip()) for code in codes.split(",") if row)
        return found
    if path.suffix != ".py":
        for row, line in enumerate(text.splitlines(), start=1):
            found.update((relative(path), row, code) for code in marked_codes(line))
        return found
    for marker in python_markers(text):
        assert marker.codes, f"{relative(path)}:{marker.row}: malformed marker {marker.comment!r}"
        found.update((relative(path), marker.row, code) for code in marker.codes)
    return found


@functools.lru_cache(maxsize=None)
def actual_findings(path: Path) -> set[tuple[str, int, str]]:
    project_settings, index = project_of(path)
    outcome = lint_text(path.read_text(encoding="utf-8"), path, project_settings, display_path=relative(path), project=index)
    assert outcome.parsed, f"{relative(path)} does not parse"
    assert outcome.internal_errors == ()
    return {(finding_file(relative(path), d.cell), d.location.row, d.code) for d in outcome.diagnostics}


def finding_file(path: str, cell: int | None) -> str:
    return path if cell is None else f"{path}:cell {cell}"


def fixture_id(path: Path) -> str:
    return path.relative_to(FIXTURES).as_posix()


def test_fixture_files_exist():
    assert len(FIXTURE_FILES) >= 10
    markers = set().union(*(expected_findings(p) for p in FIXTURE_FILES))
    assert {code for _, _, code in markers} >= FIXED_CODES


def test_markers_name_known_codes():
    known = set(all_codes())
    for path in FIXTURE_FILES + RECIPE_FIXTURES + NOTEBOOK_FIXTURES:
        for file, line, code in expected_findings(path):
            assert code in known, f"{file}:{line}: unknown code {code} in marker"


@pytest.mark.parametrize("path", FIXTURE_FILES + NOTEBOOK_FIXTURES, ids=fixture_id)
def test_findings_match_markers(path: Path):
    expected = expected_findings(path)
    actual = actual_findings(path)
    missing = sorted(expected - actual)
    unexpected = sorted(actual - expected)
    assert not missing and not unexpected, f"missing: {missing}\nunexpected: {unexpected}"


def test_all_findings_match_all_markers():
    """The whole tree at once: what `ckptlint fixtures/` must print."""
    expected = set().union(*(expected_findings(p) for p in FIXTURE_FILES + NOTEBOOK_FIXTURES))
    actual = set().union(*(actual_findings(p) for p in FIXTURE_FILES + NOTEBOOK_FIXTURES))
    assert actual == expected


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=fixture_id)
def test_fixes(path: Path):
    text = path.read_text(encoding="utf-8")
    project_settings, index = project_of(path)
    outcome = fix_text(text, path, project_settings, unsafe=True, display_path=relative(path), project=index)
    assert outcome.error is None
    fixed = outcome.text
    ast.parse(fixed, filename=relative(path))

    # Every finding that offers a fix is fixed, and nothing fixable is left.
    before = lint_text(text, path, project_settings, project=index).diagnostics
    with_fix = [d for d in before if d.fix is not None]
    assert len(outcome.applied) >= len(with_fix)
    remaining = lint_text(fixed, path, project_settings, display_path=relative(path), project=index)
    assert not [d for d in remaining.diagnostics if d.fix is not None]
    assert {d.code for d in outcome.remaining.diagnostics} == {d.code for d in remaining.diagnostics}

    # Comments survive, and only the text the fixes' edits cover changed.
    assert comments(fixed) == comments(text)
    spans = [(e.location.row, e.end_location.row) for d in with_fix for e in d.fix.edits]
    old_lines, new_lines = text.splitlines(), fixed.splitlines()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        # 1-based rows of the original that changed (an insertion: the row it goes before).
        for row in range(i1 + 1, max(i1 + 1, i2) + 1):
            assert any(start <= row <= end + 1 for start, end in spans), (
                f"{relative(path)}:{row}: changed outside any fix's edits"
            )

    # A second pass is a no-op.
    again = fix_text(fixed, path, project_settings, unsafe=True, display_path=relative(path), project=index)
    assert again.text == fixed
    assert again.applied == ()


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=fixture_id)
def test_safe_fixes_leave_only_unsafe_findings(path: Path):
    """Without --unsafe-fixes only the safe fixes are applied; findings with unsafe fixes stay."""
    text = path.read_text(encoding="utf-8")
    markers = expected_findings(path)
    project_settings, index = project_of(path)
    before = lint_text(text, path, project_settings, project=index).diagnostics
    outcome = fix_text(text, path, project_settings, unsafe=False, display_path=relative(path), project=index)
    assert outcome.error is None
    ast.parse(outcome.text)
    safe = [d for d in before if d.fix is not None and d.fix.applicability is Applicability.SAFE]
    assert {f.code for f in outcome.applied} <= {d.code for d in safe}
    assert len(outcome.applied) >= len(safe)
    left = outcome.remaining.diagnostics
    assert not [d for d in left if d.fix is not None and d.fix.applicability is Applicability.SAFE]
    # A fix that inserts a line (`model.config.use_cache = False`) moves the findings below it.
    assert {(d.location.row, d.code) for d in left} <= {(_moved(line, safe), code) for _, line, code in markers}


def _moved(row: int, fixed: list) -> int:
    """Where the line `row` of the text is once the safe fixes (all applied) are made."""
    moved = row
    for diagnostic in fixed:
        for edit in diagnostic.fix.edits:
            if (edit.end_location.row, edit.end_location.column) <= (row, 1):
                moved += edit.content.count("\n") - (edit.end_location.row - edit.location.row)
    return moved


REQUIRED_FORMS = {
    "alias import": "from torch.utils.checkpoint import checkpoint as ck",
    "module alias": "import torch.utils.checkpoint as cp",
    "module from-import": "from torch.utils import checkpoint as m",
    "assigned name": "run = torch.utils.checkpoint.checkpoint\n",
    "module-level partial": "functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)",
    "partial in __init__": "self.ckpt_fn = partial(checkpoint,",
    "checkpoint_sequential": "checkpoint_sequential(",
    "flag from config": "use_reentrant=self.config.use_reentrant",
    "flag from variable": "use_reentrant=use_reentrant",
    "flag in **kwargs": "**self.ckpt_kwargs",
    "own saving helper": "def checkpoint(model, path):",
    "relative import": "from .utils import checkpoint",
    "deepspeed": "deepspeed.checkpointing.checkpoint(",
    "jax": "jax.checkpoint(",
    "timm-style wrapper": "def checkpoint_seq(",
    "save/load helpers": "def save_checkpoint(",
}


@pytest.mark.parametrize("form", sorted(REQUIRED_FORMS))
def test_fixtures_cover_form(form: str):
    """The fixtures are the acceptance test for name resolution; keep every form in them."""
    needle = REQUIRED_FORMS[form]
    assert any(needle in p.read_text(encoding="utf-8") for p in FIXTURE_FILES), needle


def test_readme_demo_reports_the_markers(monkeypatch):
    """`ckptlint fixtures/` (the README demo) reports exactly the marked findings."""
    monkeypatch.chdir(REPO_ROOT)
    result = CliRunner().invoke(
        main,
        ["check", "fixtures/", "--output-format", "json", "--no-cache", "--target-version", "torch=2.13"],
        catch_exceptions=False,
    )
    assert result.exit_code == 1, result.output
    items = json.loads(result.stdout)
    reported = {
        (
            finding_file(Path(item["filename"]).resolve().relative_to(REPO_ROOT).as_posix(), item["cell"]),
            item["location"]["row"],
            item["code"],
        )
        for item in items
    }
    expected = set().union(*(expected_findings(p) for p in FIXTURE_FILES + RECIPE_FIXTURES + NOTEBOOK_FIXTURES))
    assert reported == expected
    assert len(items) == len(expected)  # the README's count: one finding per marker
    assert any(item["cell"] is not None for item in items)  # the notebooks are linted
