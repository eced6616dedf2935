"""The README's rule table, docs/rules/ and pyproject.toml's package list are generated from the rule folders."""

from __future__ import annotations

from pathlib import Path

from ckptlint.docs import pyproject_with_packages, readme_with_table, rule_pages

REPOSITORY = Path(__file__).resolve().parent.parent


def test_readme_rule_table_is_current():
    readme = (REPOSITORY / "README.md").read_text(encoding="utf-8")
    assert readme == readme_with_table(readme), "README rule table is stale: run `python -m ckptlint.docs`"


def test_rule_pages_are_current():
    pages = REPOSITORY / "docs" / "rules"
    expected = rule_pages()
    assert sorted(p.name for p in pages.glob("*.md")) == sorted(expected)
    for name, text in expected.items():
        assert (pages / name).read_text(encoding="utf-8") == text, f"{name} is stale: run `python -m ckptlint.docs`"


def test_pyproject_lists_every_package():
    """Each rule folder is a package of the wheel: `python -m ckptlint.docs` lists it."""
    pyproject = (REPOSITORY / "pyproject.toml").read_text(encoding="utf-8")
    assert pyproject == pyproject_with_packages(pyproject, REPOSITORY), "stale: run `python -m ckptlint.docs`"
