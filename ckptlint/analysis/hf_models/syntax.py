"""libcst helpers of the interpreter: names, literals, where a line can go."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.model.library import HF_LIBRARY_ROOTS, NOT_MODEL_NAME
from ckptlint.rule import Replacement

if TYPE_CHECKING:
    from ckptlint.rule import FileContext


def body_of(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    body = getattr(node, "body", None)
    if isinstance(body, (cst.IndentedBlock, cst.SimpleStatementSuite)):
        return body.body
    if isinstance(body, Sequence):
        return body
    return ()


def bare(expr: cst.BaseExpression) -> cst.BaseExpression:
    return expr.with_changes(lpar=(), rpar=()) if getattr(expr, "lpar", None) else expr


def dotted_text(expr: cst.BaseExpression) -> str | None:
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted_text(expr.value)
        return f"{base}.{expr.attr.value}" if base is not None else None
    return None


def dotted_name(expr: ast.AST | None) -> str | None:
    """`model`, `self.model` (a node of the file's `ast` tree): the name as the project
    model's events name it."""
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        base = dotted_name(expr.value)
        return f"{base}.{expr.attr}" if base is not None else None
    return None


def is_simple_reference(expr: ast.AST | None) -> bool:
    """`model`, `self.model`, `accelerator.unwrap_model`-free dotted names: safe to repeat
    in an inserted statement."""
    return dotted_name(expr) is not None


def literal_value(expr: cst.BaseExpression | None) -> bool | None:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return expr.value == "True"
    return None


def is_true(expr: cst.BaseExpression) -> bool:
    return literal_value(expr) is True


def is_false(expr: cst.BaseExpression) -> bool:
    return literal_value(expr) is False or (isinstance(expr, cst.Name) and expr.value == "None")


def dict_keys(expr: cst.BaseExpression) -> dict[str, cst.BaseExpression] | None:
    if isinstance(expr, cst.Dict):
        keys = {}
        for element in expr.elements:
            if not isinstance(element, cst.DictElement) or not isinstance(element.key, cst.SimpleString):
                return None
            keys[str(element.key.evaluated_value)] = element.value
        return keys
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict":
        if any(arg.star or arg.keyword is None for arg in expr.args):
            return None
        return {arg.keyword.value: arg.value for arg in expr.args}
    return None


def subscript_key(target: cst.Subscript) -> str | None:
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return None
    key = target.slice[0].slice.value
    return str(key.evaluated_value) if isinstance(key, cst.SimpleString) else None


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


def code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


# --- entry point -----------------------------------------------------------------------------


def line_of(node: ast.AST) -> int:
    """The line an `ast` node starts on."""
    return node.lineno


def source_of(context: FileContext, expr: ast.AST) -> str:
    """An expression's code as written (with its parentheses: libcst's node's code)."""
    node = context.cst_node_at(expr, cst.BaseExpression)
    return code_of(node) if node is not None else ast.get_source_segment(context.text, expr) or ""


def insert_line(context: FileContext, statement: ast.stmt | None, code: str, *, before: bool) -> Replacement | None:
    """A replacement inserting the statement `code` on its own line just before or after
    the line of `statement`, at its indentation; comments and blank lines above it stay
    above both. None when no line can go there (no statement, or one sharing a line with
    `if x:`)."""
    line = context.cst_node_at(statement, cst.SimpleStatementLine)
    if line is None:
        return None
    inserted = cst.parse_statement(code + "\n")
    if before:
        new = [inserted.with_changes(leading_lines=line.leading_lines), line.with_changes(leading_lines=())]
    else:
        new = [line, inserted]
    return Replacement(line, cst.FlattenSentinel(new))
