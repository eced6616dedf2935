"""Every rule's `valid` / `invalid` examples, turned into tests (Fixit style)."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from ckptlint.config import Settings
from ckptlint.engine import fix_text, lint_text
from ckptlint.registry import all_rules
from ckptlint.rule_cases import rule_folder

ROOT = Path("/nonexistent-project")
PATH = ROOT / "example.py"


def _cases(kind: str):
    for rule in all_rules():
        for index, example in enumerate(getattr(rule, kind)):
            yield pytest.param(rule, example, id=f"{rule.code}-{kind}-{index}")


def _settings(rule, example) -> Settings:
    # Through selection, as a run selects rules: a rule the registry does not know (not in
    # the generated manifest) cannot be selected, and fails its own examples. Installed
    # versions are ignored so results do not depend on the test machine.
    return Settings.default(ROOT, target_versions=example.target_versions, select=[rule.code], use_installed=False)


@pytest.mark.parametrize(("rule", "example"), list(_cases("valid")))
def test_valid_example_is_not_reported(rule, example):
    outcome = lint_text(example.source, PATH, _settings(rule, example))
    assert outcome.internal_errors == ()
    assert [(d.code, d.location.row) for d in outcome.diagnostics] == []


@pytest.mark.parametrize(("rule", "example"), list(_cases("invalid")))
def test_invalid_example_is_reported_and_fixed(rule, example):
    settings = _settings(rule, example)
    outcome = lint_text(example.source, PATH, settings)
    assert outcome.internal_errors == ()
    found = [(d.code, d.location.row, d.location.column) for d in outcome.diagnostics]
    assert found == [(rule.code, example.line, example.column)]
    diagnostic = outcome.diagnostics[0]
    if example.message_contains:
        assert example.message_contains in diagnostic.message
    if example.fixed_source is None:
        assert diagnostic.fix is None
        return
    assert diagnostic.fix is not None and diagnostic.fix.applicability is rule.fix
    fixed = fix_text(example.source, PATH, settings, unsafe=True)
    assert fixed.error is None
    assert fixed.text == example.fixed_source
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
    assert rule.valid and rule.invalid, f"{rule.code} needs valid and invalid examples"
