"""Finds the rules: every `Rule` subclass in a module of the `ckptlint.rules` package.

Importing the rules imports libcst (0.15 s); what a run needs before it parses anything
(codes, names, which rules read the project index, fix safety, trigger words) comes from
`RULE_MANIFEST` and `RULE_TRIGGERS` instead, generated from the rule classes into
`ckptlint/rule_manifest.py` by `python -m ckptlint.docs` (`manifest_module()` below) and
kept current by a test."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import TYPE_CHECKING

from ckptlint.registry_types import RuleSummary
from ckptlint.types import Applicability, PseudoRule

if TYPE_CHECKING:
    from ckptlint.rule import Rule


# What a run needs to know of every rule without importing the rules (libcst): written by
# `python -m ckptlint.docs` from the rule classes into `ckptlint/rule_manifest.py`, which a
# test keeps current. A new rule module is found, registered and documented by that command.
from ckptlint.rule_manifest import RULE_MANIFEST, RULE_TRIGGERS  # noqa: E402

PARSE_ERROR = PseudoRule(
    code="CKPT900",
    name="parse-error",
    doc="""\
The file could not be parsed, or not analysed within the per-file limits.

## What it does
Reports a syntax error (Python, or YAML / JSON for a training recipe), with the parser's
line, column and message. The file is not
linted; the run goes on over the other files and exits 1. A YAML or JSON file is parsed
only when it mentions one of the recipe trigger words (`gradient_checkpointing`, `fsdp`,
`activation_checkpointing`, `use_reentrant`), so unrelated data files are never reported.

Also reports, at line 1, a file that mentions checkpointing but that ckptlint stopped
analysing, with the reason:
- larger than the size limit (1 MiB; `CKPTLINT_FILE_SIZE_LIMIT`), checked before the file is
  read: generated tables, sympy output, unrolled kernels;
- an expression nested more than 1,000 levels deep (a generated chain of thousands of
  operators, attributes or calls, on which libcst's parser is quadratic), or a syntax tree
  whose analysis would need more than the memory limit;
- its analysis ran past the time limit (120 s; `CKPTLINT_FILE_TIME_LIMIT`) or the memory
  limit (1024 MiB; `CKPTLINT_FILE_MEMORY_LIMIT`), or crashed. The analysis runs in a worker
  process that is killed at the limit, native code included.

A larger file that never mentions checkpointing could hold no finding: it is skipped
without a word.

## Why is this bad?
A file ckptlint cannot parse is a file it cannot check. Python would refuse it too, unless
it is not Python at all (a template, a notebook export): exclude such files with `exclude`.
A file stopped at a limit is generated code, as a rule: exclude it, or raise the limit.
""",
)

UNREADABLE_FILE = PseudoRule(
    code="CKPT901",
    name="unreadable-file",
    doc="""\
The file could not be read or decoded.

## What it does
Reports a file that cannot be opened (permissions, a dangling link, a directory named
`*.py`) or whose bytes are not valid in its declared encoding (PEP 263; UTF-8 by default).
The run goes on over the other files and exits 1.

## Why is this bad?
A file ckptlint cannot read is a file it cannot check. Python would fail to import a file it
cannot decode, too.
""",
)

UNUSED_NOQA = PseudoRule(
    code="CKPT100",
    name="unused-noqa",
    fix=Applicability.SAFE,
    opt_in=True,
    doc="""\
A `# noqa` directive names a ckptlint code that suppresses nothing on its line.

## What it does
Reports, in Python files and notebooks, each `# noqa: ...` directive naming a ckptlint code
(`CKPT...`) that has no finding to suppress on its line: the rule ran on the file and found
nothing there (unused), the code names no rule (unknown, e.g. a typo: `CKPT0011`), or the
directive names the code twice (duplicated). Other tools' codes (`E501`, `F401`) and bare
`# noqa` are theirs to judge, and are left alone. Codes of rules that did not run on the
file (not selected, or ruled out by its target versions) are not judged either: another
run may need them. A `# noqa: CKPT100` (or a bare `# noqa`) on the line keeps it quiet.

Off by default, as Ruff's RUF100: `ALL` does not select it. Turn it on with
`--extend-select CKPT100` or `extend-select = ["CKPT100"]`. Without it, an unknown ckptlint
code in a `# noqa` is a warning on stderr, and the exit status is left alone.

## Why is this bad?
A suppression that suppresses nothing hides the next real finding on its line, and a
mistyped code suppresses nothing while it reads as if it did.

## Example
```python
y = checkpoint(block, x, use_reentrant=False)  # noqa: CKPT001, E501
```

## Use instead
```python
y = checkpoint(block, x, use_reentrant=False)  # noqa: E501
```

## Fix safety
Safe: the fix removes only the codes reported (the whole comment when nothing is left,
keeping other comments on the line), and they suppress nothing.
""",
)

ENGINE_CODES = {rule.code: rule for rule in (UNUSED_NOQA, PARSE_ERROR, UNREADABLE_FILE)}


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule class, sorted by code. Importing the rule pack happens here, once."""
    from ckptlint import rules as package

    from ckptlint.rule import Rule

    found: dict[str, type[Rule]] = {}
    for module_info in pkgutil.iter_modules(package.__path__):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package.__name__}.{module_info.name}")
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, Rule)
                and value is not Rule
                and value.__module__ == module.__name__
            ):
                if value.code in found or value.code in ENGINE_CODES:
                    raise RuntimeError(f"rule code {value.code} is declared twice")
                found[value.code] = value
    return tuple(found[code] for code in sorted(found))


def all_codes() -> list[str]:
    return sorted([rule.code for rule in RULE_MANIFEST] + list(ENGINE_CODES))


def rule_name(code: str) -> str | None:
    code = code.upper()
    if code in ENGINE_CODES:
        return ENGINE_CODES[code].name
    summary = rule_summary(code)
    return summary.name if summary is not None else None


def rule_summary(code: str) -> RuleSummary | None:
    code = code.upper()
    return next((rule for rule in RULE_MANIFEST if rule.code == code), None)


def project_rule_codes() -> frozenset[str]:
    """The codes of the rules that read the project index."""
    return frozenset(rule.code for rule in RULE_MANIFEST if rule.uses_project)


def manifest_of(rules) -> tuple[RuleSummary, ...]:
    return tuple(RuleSummary(rule.code, rule.name, bool(rule.uses_project), rule.fix) for rule in rules)


def triggers_of(rules) -> tuple[str, ...]:
    return tuple(sorted({word.decode() for rule in rules for word in rule.triggers}))


def rule_by_code(code: str) -> type[Rule] | PseudoRule | None:
    code = code.upper()
    if code in ENGINE_CODES:
        return ENGINE_CODES[code]
    return next((rule for rule in all_rules() if rule.code == code), None)


def rule_by_code_or_name(key: str) -> type[Rule] | PseudoRule | None:
    found = rule_by_code(key)
    if found is not None:
        return found
    candidates = [*all_rules(), *ENGINE_CODES.values()]
    return next((rule for rule in candidates if rule.name == key), None)


def manifest_module() -> str:
    """The text of `ckptlint/rule_manifest.py`, from the rule classes."""
    rules = all_rules()
    lines = [
        '"""Generated by `python -m ckptlint.docs` from the rule classes: do not edit."""',
        "",
        "from ckptlint.types import Applicability",
        "from ckptlint.registry_types import RuleSummary",
        "",
        "# Every rule, by code: what a run needs without importing the rules.",
        "RULE_MANIFEST: tuple[RuleSummary, ...] = (",
    ]
    for rule in manifest_of(rules):
        fix = "None" if rule.fix is None else f"Applicability.{rule.fix.name}"
        lines.append(f'    RuleSummary("{rule.code}", "{rule.name}", {rule.uses_project}, {fix}),')
    lines += [
        ")",
        "",
        "# Every rule needs one of its trigger words in a file's text: a file with none of these",
        "# needs no rule at all.",
        "RULE_TRIGGERS: tuple[str, ...] = (",
        *(f"    {word!r},".replace("'", '"') for word in triggers_of(rules)),
        ")",
        "",
    ]
    return "\n".join(lines)
