"""The case driver: every case file of every rule folder (`rules/<slug>/cases/*.py`, the
format in `ckptlint/rule_cases.py`) is linted with its rule selected, and must give exactly
the findings its `# expect:` markers name (code, line, column), and exactly its `.py.fixed`
sibling once fixed. Test ids start with the rule's code: `pytest -k CKPT010`."""

from __future__ import annotations

import re
from pathlib import Path

import libcst as cst
import pytest

from ckptlint.config import Settings
from ckptlint.engine import fix_text, lint_text
from ckptlint.registry import all_rules
from ckptlint.rule_cases import CASES_DIRECTORY, FIXED_SUFFIX, rule_cases, rule_folder

ROOT = Path("/nonexistent-project")
PATH = ROOT / "example.py"
# Kebab-case: no case file is a name Python could import (see pyproject.toml's package data).
CASE_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)+")


def _cases():
    for rule in all_rules():
        for case in rule_cases(rule):
            yield pytest.param(rule, case, id=f"{rule.code}-{case.name}")


def _settings(rule, case) -> Settings:
    # Through selection, as a run selects rules: a rule the registry does not know (not in
    # the generated manifest) cannot be selected, and fails its own cases. Installed
    # versions are ignored so results do not depend on the test machine.
    return Settings.default(ROOT, target_versions=dict(case.target_versions), select=[rule.code], use_installed=False)


@pytest.mark.parametrize(("rule", "case"), list(_cases()))
def test_case(rule, case):
    settings = _settings(rule, case)
    outcome = lint_text(case.source, PATH, settings)
    assert outcome.internal_errors == ()
    found = [(d.code, d.location.row, d.location.column) for d in outcome.diagnostics]
    assert [(code, row) for code, row, _ in found] == [(code, row) for row, code in case.expected]
    if not case.expected:
        return
    assert {code for _, code in case.expected} == {rule.code}, "a case marks its own rule's findings"
    if len(found) == 1:
        assert found[0][2] == (case.column or 1)
    if case.message_contains:
        assert case.message_contains in outcome.diagnostics[0].message
    fixed_source = case.fixed_source
    if fixed_source is None:
        assert all(d.fix is None for d in outcome.diagnostics)
        return
    assert all(d.fix is not None and d.fix.applicability is rule.fix for d in outcome.diagnostics)
    fixed = fix_text(case.source, PATH, settings, unsafe=True)
    assert fixed.error is None
    assert fixed.text == fixed_source
    cst.parse_module(fixed.text)
    assert fix_text(fixed.text, PATH, settings, unsafe=True).text == fixed.text  # idempotent


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_rule_is_complete(rule):
    assert rule.code.startswith("CKPT") and len(rule.code) == 7
    assert rule.name == rule_folder(rule).name.replace("_", "-")
    documentation = rule.documentation()
    for section in ("## What it does", "## Why is this bad?", "## Example", "## Use instead", "## Evidence"):
        assert section in documentation, f"{rule.code} lacks {section}"
    if rule.fix is not None:
        assert "## Fix safety" in documentation
    cases = rule_cases(rule)
    assert all(f"- {case.title} (`{case.path.name}`" in documentation for case in cases)  # the page lists them
    assert [c for c in cases if c.expected] and [c for c in cases if not c.expected], (
        f"{rule.code} needs cases it reports and cases it does not"
    )


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.code)
def test_cases_folder_holds_only_cases(rule):
    """Each file is a case `NAME.py` or the `NAME.py.fixed` of one; names in kebab-case."""
    directory = rule_folder(rule) / CASES_DIRECTORY
    names = {path.name for path in directory.iterdir() if path.name != "__pycache__"}
    cases = {name for name in names if name.endswith(".py")}
    assert names - cases == {name + FIXED_SUFFIX for name in cases if name + FIXED_SUFFIX in names}
    assert all(CASE_NAME.fullmatch(name.removesuffix(".py")) for name in cases), sorted(cases)
