"""The codes a run knows without importing the rules (which imports libcst): the rules'
codes, names, whether they read the project index and their fix safety, from
`ckptlint/rule_manifest.py` (generated from the rule classes by `python -m ckptlint.docs`),
and the codes the engine itself reports (CKPT100, CKPT900, CKPT901)."""

from __future__ import annotations

from ckptlint.registry_types import RuleSummary
from ckptlint.rule_manifest import RULE_MANIFEST
from ckptlint.types import Applicability, PseudoRule, Severity


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
    # Hygiene: a stale comment changes nothing by itself.
    severity=Severity.INFO,
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
