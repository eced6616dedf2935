"""`ast` helpers of the interpreter: names, literals, a call's arguments in source order, the
conditions an `if` test states, the code of a node as written."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass

from ckptlint.model.form.branching import Branches, Conditions
from ckptlint.model.library.combined import HF_LIBRARY_ROOTS
from ckptlint.model.library.transformers import NOT_MODEL_NAME
# The extraction's readings of a call's keyword and of a name or attribute chain, under the
# names the interpreter's modules use.
from ckptlint.model.syntax.call_syntax import dotted as dotted_text, keyword_argument as keyword_value  # noqa: F401

FUNCTION_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Argument:
    """One argument of a call, as written: `x`, `key=x`, `*x` (star "*"), `**x` (star "**")."""

    value: ast.expr
    keyword: str | None = None
    star: str = ""


def arguments_of(call: ast.Call) -> tuple[Argument, ...]:
    """The call's arguments in source order (`ast` keeps positional and keyword ones apart)."""
    found = [
        (arg, Argument(arg.value, None, "*") if isinstance(arg, ast.Starred) else Argument(arg))
        for arg in call.args
    ]
    found += [(keyword, Argument(keyword.value, keyword.arg, "" if keyword.arg else "**")) for keyword in call.keywords]
    if call.args and call.keywords:  # `f(key=1, *rest)`: a star after a keyword
        found.sort(key=lambda pair: (pair[0].lineno, pair[0].col_offset))
    return tuple(argument for _, argument in found)


def literal_value(expr: ast.AST | None) -> bool | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, bool):
        return expr.value
    return None


def is_true(expr: ast.AST) -> bool:
    return literal_value(expr) is True


def is_false(expr: ast.AST) -> bool:
    return literal_value(expr) is False or (isinstance(expr, ast.Constant) and expr.value is None)


def string_value(expr: ast.AST | None) -> str | None:
    """The text of a string (or bytes) literal, as `str()` of its value."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, (str, bytes)):
        return str(expr.value)
    return None


def dict_keys(expr: ast.AST | None) -> dict[str, ast.expr] | None:
    """A dict literal's (or `dict(...)`'s) string keys and their values; None when not known."""
    if isinstance(expr, ast.Dict):
        keys = {}
        for key, value in zip(expr.keys, expr.values):
            text = string_value(key)
            if text is None:  # `**other` or a computed key
                return None
            keys[text] = value
        return keys
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == "dict":
        arguments = arguments_of(expr)
        if any(arg.star or arg.keyword is None for arg in arguments):
            return None
        return {arg.keyword: arg.value for arg in arguments}
    return None


def subscript_key(target: ast.Subscript) -> str | None:
    return string_value(target.slice)


def may_load_a_model(names: Iterable[str]) -> bool:
    """`<class>.from_pretrained` where the class is chosen at runtime (a variable): not a
    library class, and not a tokenizer, config or processor by its name."""
    for name in names:
        owner = name.removesuffix(".from_pretrained")
        if owner.split(".", 1)[0] in HF_LIBRARY_ROOTS or NOT_MODEL_NAME.search(owner.rsplit(".", 1)[-1]):
            return False
    return True


def is_peft_model_loader(name: str) -> bool:
    return name.startswith("peft.") and bool(re.search(r"\.PeftModel\w*\.from_pretrained$", name))


def is_auto_peft_loader(name: str) -> bool:
    return name.startswith("peft.") and bool(re.search(r"\.AutoPeftModel\w*\.from_pretrained$", name))


def is_config_class(name: str) -> bool:
    for suffix in (".from_pretrained", ".from_dict"):
        name = name.removesuffix(suffix)
    return name.split(".", 1)[0] == "transformers" and name.endswith("Config") and not name.endswith("GenerationConfig")


class SourceText:
    """The code of the file's nodes as written (`ast.get_source_segment`, without splitting
    the text again for each node)."""

    def __init__(self, text: str) -> None:
        self._text = text
        self._ascii = text.isascii()
        self._starts: list[int] | None = None  # where each line starts in the text

    def of(self, node: ast.AST) -> str:
        if self._starts is None:
            self._starts = [0, *(match.end() for match in re.finditer(r"\r\n?|\n", self._text))]
        start = self._starts[node.lineno - 1] + self._column(node.lineno, node.col_offset)
        end = self._starts[node.end_lineno - 1] + self._column(node.end_lineno, node.end_col_offset)
        return self._text[start:end]

    def _column(self, line: int, byte_offset: int) -> int:
        """`ast` counts columns in UTF-8 bytes."""
        if self._ascii:
            return byte_offset
        text = self._text[self._starts[line - 1] : self._starts[line] if line < len(self._starts) else None]
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))


# --- conditions ------------------------------------------------------------------------------

_COMPARISONS = {
    ast.Eq: ("==", True), ast.NotEq: ("==", False), ast.Is: ("is", True), ast.IsNot: ("is", False),
    ast.In: ("in", True), ast.NotIn: ("in", False),
}


def condition_literals(test: ast.expr, truth: bool, source: SourceText) -> Conditions:
    """What `test` being `truth` says, as a conjunction of (condition, truth) pairs, each
    condition written as in the code (`analysis.branches.condition_literals` on libcst)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return condition_literals(test.operand, not truth, source)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) == truth:
        # `a and b` true, or `a or b` false: each side is known.
        return tuple(pair for value in test.values for pair in condition_literals(value, truth, source))
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        operator = _COMPARISONS.get(type(test.ops[0]))
        if operator is not None:
            atom = f"{source.of(test.left)} {operator[0]} {source.of(test.comparators[0])}"
            return ((atom, truth == operator[1]),)
    return ((source.of(test), truth),)


def branch_paths(tree: ast.AST, source: SourceText) -> dict[int, tuple[Branches, Conditions]]:
    """For every call of the tree (by id): the `if` branches it sits in, outermost first,
    and what their tests require. A call in an `if`'s test is outside its branches; an
    `elif` is a branch of its own inside the `else` of the `if` before it. (Conditional
    expressions, loops, `try` and `match` make no branches here.)"""
    found: dict[int, tuple[Branches, Conditions]] = {}
    pending: list[tuple[ast.AST, Branches, Conditions]] = [(tree, (), ())]
    while pending:
        node, branches, conditions = pending.pop()
        if isinstance(node, ast.If):
            for index, (body, truth) in reversed(list(enumerate(((node.body, True), (node.orelse, False))))):
                if body:
                    inner = (branches + ((id(node), index),), conditions + condition_literals(node.test, truth, source))
                    pending.extend((statement, *inner) for statement in reversed(body))
            pending.append((node.test, branches, conditions))
            continue
        if isinstance(node, ast.Call):
            found[id(node)] = (branches, conditions)
        pending.extend((child, branches, conditions) for child in ast.iter_child_nodes(node))
    return found


def literal_truth(expr: ast.AST, known: Conditions = ()) -> bool | None:
    """The truth of a literal (`False`, `None`, `0`, `"x"`), or of a name `known` says the
    truth of; None when it is not known here."""
    if isinstance(expr, ast.Name):
        return dict(known).get(expr.id)
    if isinstance(expr, ast.Constant):
        if isinstance(expr.value, (bool, int, float, str, bytes)) or expr.value is None:
            return bool(expr.value)
        return None
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = literal_truth(expr.operand, known)
        return None if inner is None else not inner
    return None
