"""A libcst expression as the project model reads it: its text parsed by CPython's parser and
put in the summary form by `ckptlint.model.file_facts.ast_expressions`, the reader that built
the project index. So an expression a rule holds (the callable a checkpoint call is given, the
module `accelerator.prepare` is passed) means what the same text means to the model, and the
summary form has one reader.

The text is the node's own code (`cst.Module.code_for_node`, its parentheses and comments
included), parsed inside parentheses of its own lines: a multi-line argument, a comment at a
line's end, a bare generator expression or `x := f()` parse as written there. Text the running
Python does not parse (newer syntax, which only libcst read) is unknown."""

from __future__ import annotations

import ast

from ckptlint.lazy_libcst import cst

from ckptlint.model.file_facts.ast_expressions import expression
from ckptlint.model.form.summary import UNKNOWN, Expr, dotted_name

_PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError)


def read(node: cst.BaseExpression | None) -> Expr:
    """The summary form of a libcst expression (`("?",)`: not read)."""
    parsed = _parsed(node)
    return expression(parsed) if parsed is not None else UNKNOWN


def comprehension_clauses(node: cst.BaseComp | cst.DictComp) -> tuple[tuple[Expr, Expr], ...]:
    """A comprehension's `for` clauses, outermost first, as (target pattern, iterable)."""
    found = read(node)
    return found[2] if found[0] == "comp" else ()


def written_name(node: cst.BaseExpression | None) -> str | None:
    """`model`, `self.model.config`: a name or attribute chain as written, else None."""
    if not isinstance(node, (cst.Name, cst.Attribute)):
        return None  # nothing else is one: no text to parse
    return dotted_name(read(node))


def _parsed(node: cst.BaseExpression | None) -> ast.expr | None:
    if node is None:
        return None
    try:
        return ast.parse("(\n" + cst.Module([]).code_for_node(node) + "\n)", mode="eval").body
    except _PARSE_ERRORS:
        return None
