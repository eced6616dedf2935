"""Which `if` branches a piece of code sits in (`Branches`), what the tests of the enclosing
`if`s require of it (`Conditions`, each test as its source text and the truth it needs), and
whether two pieces of code can ever both run: different branches of one `if`, or conditions
that contradict each other (`if not use_fsdp_ac:` ... `if use_fsdp_ac:`). The form both
trees are read into: the Hugging Face interpreter's steps (`ast`, `script_models.syntax`)
and the rules that pair two calls on one model (libcst, `ckptlint.analysis.branches`)."""

from __future__ import annotations

import ast
import re

Branches = tuple[tuple[int, int], ...]  # (id of an `if` / `match`, branch index), outermost first
# What the enclosing `if`s require, as (condition source, required truth): `if a and not b:`
# gives ("a", True), ("b", False); `x != "full"` gives ('x == "full"', False).
Conditions = tuple[tuple[str, bool], ...]


def exclusive(branches: Branches, conditions: Conditions, other_branches: Branches, other_conditions: Conditions) -> bool:
    """Whether code under (`branches`, `conditions`) and code under the others never both run:
    different branches of one `if`, one condition required both ways, or one expression
    required equal to two different literals (`if args.strategy == "fsdp":` ...
    `if args.strategy == "deepspeed":`)."""
    mine = dict(branches)
    if any(node in mine and mine[node] != index for node, index in other_branches):
        return True
    required = dict(conditions)
    if any(atom in required and required[atom] != truth for atom, truth in other_conditions):
        return True
    equal = {match["left"]: ast.literal_eval(match["right"]) for atom, truth in conditions if truth and (match := _EQUALS_LITERAL.match(atom))}
    return any(
        (match := _EQUALS_LITERAL.match(atom)) is not None and match["left"] in equal
        and equal[match["left"]] != ast.literal_eval(match["right"])
        for atom, truth in other_conditions if truth
    )


# `x == "fsdp"` as `condition_literals` writes it: an expression equal to a literal.
_EQUALS_LITERAL = re.compile(r"^(?P<left>.+) == (?P<right>-?\d+(?:\.\d+)?|'[^'\\]*'|\"[^\"\\]*\"|True|False|None)$")


def contradicts(known: Conditions, conditions: Conditions) -> bool:
    """Whether code under `conditions` cannot run where `known` holds (a parameter known to
    be False, `if quantized:`): the branch is not taken."""
    return exclusive((), known, (), conditions)
