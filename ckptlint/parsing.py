"""Parsing a file for the rules: CPython's parser decides whether it is valid Python, libcst
builds the tree the rules work on, within the limits on a file's shape."""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ckptlint.limits import MAX_SYNTAX_DEPTH, AnalysisLimits, describe_depth
from ckptlint.model.syntax.ast_walk import children_of
from ckptlint.model.syntax.parsed_text import ParsedText
from ckptlint.rule_codes import PARSE_ERROR
from ckptlint.types import Diagnostic, Location

if TYPE_CHECKING:
    import libcst as cst

    from ckptlint.analysis.positions import StatementLines


# CPython rejects these before libcst's native parser would exhaust its stack on them.
_PATHOLOGICAL = ("too many nested parentheses", "too many levels of indentation", "too many statically nested blocks")


@dataclass(frozen=True)
class ParsedModule:
    """libcst's tree of a file, with CPython's tree and lines of its statements (None when
    only libcst parses the file): the project model's per-file analyses read CPython's tree,
    parsed once."""

    module: cst.Module
    statement_lines: StatementLines | None = None
    tree: ast.Module | None = None
    # What the rules' analyses compute once from this parse and share, across the rule runs
    # over it (the gated rules' run after the others'): `FileContext.once`.
    analyses: dict = field(default_factory=dict, compare=False, repr=False)


def parse_module(
    text: str,
    display: str,
    *,
    with_libcst: bool,
    limits: AnalysisLimits = AnalysisLimits(),
    needed: Callable[[ast.Module], bool] | None = None,
    parsed: ParsedText | None = None,
) -> ParsedModule | Diagnostic | None:
    """CPython's parser decides whether the file is valid Python (its messages and lines
    are the ones users know); libcst then builds the tree the rules work on, unless the
    file's shape is beyond what libcst parses within `limits`, or `needed` finds in
    CPython's tree nothing for the rules (`Rule.may_apply_to_syntax`; the shape is judged
    first, as without it). CPython's lines of the statements come along: positions need
    them (`ckptlint.analysis.positions`).

    A generic SyntaxError may only mean the file uses syntax newer than the running
    Python: libcst (which knows newer grammars) gets the last word on those. `parsed`: the
    text's CPython tree when the index's extraction of this file parsed it already."""
    try:
        tree = parsed.tree() if parsed is not None else ast.parse(text)
    except (RecursionError, MemoryError):
        return parse_error(display, 1, 1, "the file is nested too deeply for Python's parser")
    except SyntaxError as error:
        message = f"{error.msg}"
        if any(marker in message for marker in _PATHOLOGICAL):
            return parse_error(display, error.lineno or 1, error.offset or 1, message)
        import libcst as cst

        try:
            module = cst.parse_module(text)
        except (cst.ParserSyntaxError, RecursionError):
            return parse_error(display, error.lineno or 1, error.offset or 1, message)
        return ParsedModule(module) if with_libcst else None
    except ValueError as error:  # e.g. "source code string cannot contain null bytes"
        return parse_error(display, 1, 1, str(error))
    if not with_libcst:
        return None
    depth, nodes = syntax_shape(tree)
    if depth > MAX_SYNTAX_DEPTH:
        return parse_error(display, 1, 1, describe_depth(depth), kind="")
    if limits.exceeds_memory(nodes):
        return parse_error(display, 1, 1, limits.describe_nodes(nodes), kind="")
    if needed is not None and not needed(tree):
        return None
    import libcst as cst

    from ckptlint.analysis.positions import statement_lines

    lines = statement_lines(tree)
    try:
        return ParsedModule(cst.parse_module(text), lines, tree)
    except cst.ParserSyntaxError as error:
        detail = error.message.splitlines()[0][:200]
        return parse_error(display, error.raw_line, error.raw_column + 1, f"valid Python, but libcst cannot parse it: {detail}")
    except RecursionError:
        return parse_error(display, 1, 1, "the file is nested too deeply to parse (recursion limit reached)")


def syntax_shape(tree: ast.AST) -> tuple[int, int]:
    """The depth of the deepest node and the number of nodes (without recursion: the
    trees this guards against are deeper than Python's stack)."""
    depth = nodes = 0
    level = [tree]
    while level:  # level by level: no pair per node, no generator per node
        depth += 1
        nodes += len(level)
        below: list[ast.AST] = []
        for node in level:
            below.extend(children_of(node))
        level = below
    return depth, nodes


def parse_error(display: str, row: int, column: int, message: str, *, kind: str = "SyntaxError: ") -> Diagnostic:
    return Diagnostic(
        code=PARSE_ERROR.code,
        message=f"{kind}{message.strip()}",
        path=display,
        location=Location(max(row, 1), max(column, 1)),
        end_location=Location(max(row, 1), max(column, 1)),
        url=PARSE_ERROR.url(),
        severity=PARSE_ERROR.severity,
    )
