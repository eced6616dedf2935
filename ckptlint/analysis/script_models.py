"""The rules' door to the file's Hugging Face model objects (`script_models`), interpreted by
the project model on the file's `ast` tree (`ckptlint.model.script_models`), and the
libcst side of a step: its code, where a line goes (`insert_line`), through
`FileContext.cst_node_at`.

CKPT020, CKPT021, CKPT033 and CKPT005 ask for each model object of a file and its
`ModelStep`s in order; a step's nodes are `ast` nodes (`step.line`, `dotted_name`), and a
report or a fix reaches the libcst node of one with `context.cst_node_at`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.model.script_models import (
    MainInput, ModelClass, ModelHistory, ModelStep, QualifiedName, ScriptModels, StepKind, TrainerKind,
    classify_model_class, interpret,
)
from ckptlint.model.script_models.syntax import dotted_text
from ckptlint.rule import Replacement

if TYPE_CHECKING:
    from ckptlint.rule import FileContext

__all__ = [
    "MainInput", "ModelClass", "ModelHistory", "ModelStep", "ScriptModels", "StepKind", "TrainerKind",
    "classify_model_class", "dotted_name", "insert_line", "is_simple_reference", "line_of", "script_models",
    "source_of",
]

def script_models(context: FileContext) -> ScriptModels:
    """The model objects of the file and their steps (computed once per parsed file, shared
    by the rules that ask, and by the gated rules' run over the same tree)."""
    return context.once(_interpreted)


def _interpreted(context: FileContext) -> ScriptModels:
    tree = context.ast_module
    if tree is None:  # only libcst parses the file (syntax newer than the running Python)
        return ScriptModels(())
    names = context.names.model_names
    # Code whose names libcst resolves by its visiting order in ways the `ast` pass does not
    # reproduce (`ScopeNames.unsupported`): libcst's own answers, through the bridge.
    return interpret(
        tree, context.text, context.relative_path, context.project,
        names if names.unsupported is None else _LibcstNames(context),
    )


class _LibcstNames:
    """The qualified names libcst's scopes give for the interpreter's `ast` names and
    attributes (`FileContext.names` answers with libcst's for such a file)."""

    def __init__(self, context: FileContext) -> None:
        self._context = context

    def qualified(self, expr: ast.expr) -> frozenset[QualifiedName]:
        node = self._context.cst_node_at(expr, (cst.Name, cst.Attribute))
        return self._context.qualified_names(node) if node is not None else frozenset()


def dotted_name(expr: ast.AST | None) -> str | None:
    """`model`, `self.model` (a step's `ast` node): the name as the project model's events
    name it."""
    return dotted_text(expr)


def is_simple_reference(expr: ast.AST | None) -> bool:
    """`model`, `self.model`, `accelerator.unwrap_model`-free dotted names: safe to repeat
    in an inserted statement."""
    return dotted_text(expr) is not None


def line_of(node: ast.AST) -> int:
    """The line a step's node starts on."""
    return node.lineno


def source_of(context: FileContext, expr: ast.AST) -> str:
    """An expression's code as written (with its parentheses: its libcst node's code)."""
    node = context.cst_node_at(expr, cst.BaseExpression)
    return cst.Module([]).code_for_node(node) if node is not None else ast.get_source_segment(context.text, expr) or ""


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
