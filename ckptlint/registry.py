"""Finds the rules: every `Rule` subclass in a module of the `ckptlint.rules` package.

Importing the rules imports libcst (0.15 s); what a run needs before it parses anything
(the codes, which rules read the project index) comes from `RULE_MANIFEST` instead, which
`tests/test_registry.py` keeps equal to the rule classes (`python -m ckptlint.registry`
prints it)."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache
from typing import TYPE_CHECKING

from ckptlint.types import PseudoRule

if TYPE_CHECKING:
    from ckptlint.rule import Rule

# (code, name, uses_project) of every rule, by code.
RULE_MANIFEST: tuple[tuple[str, str, bool], ...] = (
    ("CKPT001", "checkpoint-implicit-reentrant", False),
    ("CKPT002", "reentrant-checkpoint-under-fsdp", True),
    ("CKPT003", "checkpoint-before-fsdp-wrap", True),
    ("CKPT004", "hf-checkpointing-with-fsdp-full-shard", True),
    ("CKPT005", "double-checkpointing", True),
    ("CKPT010", "checkpointed-batchnorm", True),
    ("CKPT011", "checkpointed-stateful-forward", True),
    ("CKPT020", "checkpointing-without-use-cache-false", True),
    ("CKPT021", "peft-checkpointing-without-input-grads", True),
    ("CKPT030", "late-binding-closure-in-checkpoint", True),
    ("CKPT031", "mutable-state-across-recompute", False),
    ("CKPT032", "kwargs-to-reentrant-checkpoint", False),
    ("CKPT033", "rng-state-not-preserved-with-dropout", True),
)

# Every rule needs one of its `triggers` in the text (`Rule.may_apply_to`): a file with none
# of these needs no rule at all.
RULE_TRIGGERS: tuple[str, ...] = (
    "FSDP",
    "FullyShardedDataParallel",
    "apply_activation_checkpointing",
    "checkpoint",
    "checkpoint_wrapper",
    "ckpt",
    "from torch import utils",
    "fsdp",
    "gradient_checkpointing",
    "gradient_checkpointing=",
    "gradient_checkpointing_enable",
    "gradient_checkpointing_kwargs",
    "import torch.utils as",
    "prepare_model_for_kbit_training",
    "torch.utils import",
    "utils.checkpoint",
)

PARSE_ERROR = PseudoRule(
    code="CKPT900",
    name="parse-error",
    doc="""\
The file could not be parsed as Python (or, for a training recipe, as YAML / JSON).

## What it does
Reports a syntax error, with the parser's line, column and message. The file is not
linted; the run goes on over the other files and exits 1. A YAML or JSON file is parsed
only when it mentions one of the recipe trigger words (`gradient_checkpointing`, `fsdp`,
`activation_checkpointing`, `use_reentrant`), so unrelated data files are never reported.

## Why is this bad?
A file ckptlint cannot parse is a file it cannot check. Python would refuse it too, unless
it is not Python at all (a template, a notebook export): exclude such files with `exclude`.
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

ENGINE_CODES = {rule.code: rule for rule in (PARSE_ERROR, UNREADABLE_FILE)}


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
    return sorted([code for code, _, _ in RULE_MANIFEST] + list(ENGINE_CODES))


def rule_name(code: str) -> str | None:
    code = code.upper()
    if code in ENGINE_CODES:
        return ENGINE_CODES[code].name
    return next((name for known, name, _ in RULE_MANIFEST if known == code), None)


def project_rule_codes() -> frozenset[str]:
    """The codes of the rules that read the project index."""
    return frozenset(code for code, _, uses_project in RULE_MANIFEST if uses_project)


def manifest_of(rules) -> tuple[tuple[str, str, bool], ...]:
    return tuple((rule.code, rule.name, bool(rule.uses_project)) for rule in rules)


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


if __name__ == "__main__":
    print("RULE_MANIFEST:")
    for code, name, uses_project in manifest_of(all_rules()):
        print(f'    ("{code}", "{name}", {uses_project}),')
    print("RULE_TRIGGERS:")
    for word in triggers_of(all_rules()):
        print(f"    {word!r},".replace("'", '"'))
