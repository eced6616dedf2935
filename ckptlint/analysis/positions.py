"""Where nodes are in the file: libcst's `PositionProvider` ranges, computed for less.

libcst's provider follows the line and column through every token of the code it
generates and builds a `CodeRange` for every node of the module (and first walks the
whole tree once for its batchable providers, of which there are none here). A file
usually needs a few positions: here the code generation records only where, in its
tokens, each node starts and ends; a range becomes lines and columns when asked for.

With the lines CPython's parser gave each statement (`statement_lines`, taken from the
`ast` tree the engine parses anyway), not even the whole module is generated: a node's
range comes from the code of the innermost statement holding it (a line of small
statements, or a compound statement), generated alone in its block's indentation and
placed at the statement's line. A 4,600-line file whose rules ask for a few calls' lines
generates a few lines instead of all of them. Nodes outside every statement (the
module's own comments), or a tree the lines do not match, get the whole module's.

The ranges are libcst's own (`tests/test_positions.py` compares them for every node).
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate

from ckptlint.lazy_libcst import cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

from ckptlint.analysis.cst_walk import child_nodes

_NEWLINE = re.compile(r"\r\n?|\n")  # libcst's own (`position_provider.NEWLINE_RE`)


@dataclass
class _TokenSpans(CodegenState):
    """Code generation recording each node's span as token indices, with libcst's
    `PositionProvidingCodegenState` rules: a node's syntactic span (hoisted from its
    first and last children where the node says so) wins over its whole span."""

    spans: dict[cst.CSTNode, tuple[int, int]] = field(default_factory=dict)
    _starts: list[int] = field(default_factory=list)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self._starts.append(len(self.tokens))

    def after_codegen(self, node: cst.CSTNode) -> None:
        start = self._starts.pop()
        if node not in self.spans:
            self.spans[node] = (start, len(self.tokens))

    def record_syntactic_position(
        self, node: cst.CSTNode, *, start_node: cst.CSTNode | None = None, end_node: cst.CSTNode | None = None
    ) -> _SyntacticSpan:
        return _SyntacticSpan(self, node, start_node, end_node)

    def pop_trailing_newline(self) -> None:
        # libcst's line and column keep counting the module's last newline after it drops it.
        pass


class _SyntacticSpan:
    """`record_syntactic_position`'s context: a class, not `contextlib.contextmanager`, whose
    generator and wrapper cost more than the rest of the recording (it is entered for most
    nodes)."""

    __slots__ = ("state", "node", "start_node", "end_node", "start")

    def __init__(self, state: _TokenSpans, node: cst.CSTNode, start_node: cst.CSTNode | None, end_node: cst.CSTNode | None) -> None:
        self.state, self.node, self.start_node, self.end_node = state, node, start_node, end_node

    def __enter__(self) -> None:
        self.start = len(self.state.tokens)

    def __exit__(self, *exc_info) -> None:
        state = self.state
        start = state.spans[self.start_node][0] if self.start_node is not None else self.start
        end = state.spans[self.end_node][1] if self.end_node is not None else len(state.tokens)
        state.spans[self.node] = (start, end)


# CPython's line of each statement of a body, with the bodies it holds (in libcst's order of
# blocks: `_blocks`): ((line, (body, ...)), ...). A line of small statements (`a = 1; b = 2`)
# is one statement per small statement here.
StatementLines = tuple


def statement_lines(tree: ast.Module) -> StatementLines:
    """The lines of the tree's statements, nested as their bodies are."""
    return _lines_of(tree.body)


def _lines_of(body: list[ast.stmt]) -> StatementLines:
    return tuple((statement.lineno, tuple(_lines_of(inner) for inner in _ast_bodies(statement))) for statement in body)


_TRY = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))


def _ast_bodies(statement: ast.stmt) -> tuple[list[ast.stmt], ...]:
    if isinstance(statement, (ast.If, ast.For, ast.AsyncFor, ast.While)):
        return statement.body, statement.orelse
    if isinstance(statement, _TRY):
        return (statement.body, *(handler.body for handler in statement.handlers), statement.orelse, statement.finalbody)
    if isinstance(statement, (ast.With, ast.AsyncWith, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return (statement.body,)
    if isinstance(statement, ast.Match):
        return tuple(case.body for case in statement.cases)
    return ()


def _blocks(statement: cst.BaseCompoundStatement) -> tuple[cst.CSTNode | None, ...]:
    """The statement's blocks in the order of `_ast_bodies` (None where CPython's body is
    empty); an `elif` as its `If`."""
    if isinstance(statement, cst.If):
        orelse = statement.orelse
        return statement.body, (orelse.body if isinstance(orelse, cst.Else) else orelse)
    if isinstance(statement, (cst.For, cst.While)):
        return statement.body, (statement.orelse.body if statement.orelse is not None else None)
    if isinstance(statement, (cst.Try, cst.TryStar)):
        return (
            statement.body, *(handler.body for handler in statement.handlers),
            statement.orelse.body if statement.orelse is not None else None,
            statement.finalbody.body if statement.finalbody is not None else None,
        )
    if isinstance(statement, cst.Match):
        return tuple(case.body for case in statement.cases)
    return (statement.body,)  # with, def, class


class _Mismatch(Exception):
    """CPython's statements and libcst's do not pair up."""


# A statement's line, its block's indentation, and whether it is an `elif` (generated as one).
_Anchor = tuple[int, tuple[str, ...], bool]


def _pair(
    statements: Sequence[cst.CSTNode], lines: StatementLines, indents: tuple[str, ...], default: str,
    found: dict[cst.CSTNode, _Anchor],
) -> None:
    """Each statement of a block (and each `elif`) with its line and its block's indentation."""
    index = 0
    for statement in statements:
        if index >= len(lines):
            raise _Mismatch
        line, bodies = lines[index]
        found[statement] = (line, indents, False)
        if isinstance(statement, cst.SimpleStatementLine):
            index += len(statement.body)
            continue
        index += 1
        _pair_blocks(statement, bodies, indents, default, found)
    if index != len(lines):
        raise _Mismatch


def _pair_blocks(statement, bodies: tuple[StatementLines, ...], indents: tuple[str, ...], default: str, found: dict) -> None:
    blocks = _blocks(statement)
    if len(blocks) != len(bodies):
        raise _Mismatch
    if isinstance(statement, cst.Match):  # its cases are indented below it
        indents = (*indents, default if statement.indent is None else statement.indent)
    for block, body in zip(blocks, bodies):
        if isinstance(block, cst.IndentedBlock):
            _pair(block.body, body, (*indents, default if block.indent is None else block.indent), default, found)
        elif isinstance(block, cst.If):  # an `elif`: CPython's `orelse` holds its `If`
            if len(body) != 1:
                raise _Mismatch
            found[block] = (body[0][0], indents, True)
            _pair_blocks(block, body[0][1], indents, default, found)
        # A block on the header's line (`if x: y = 1`) holds no statement lines: its code is
        # the compound statement's.


class _Code:
    """One generated stretch of code (the module, or a statement alone): where each node
    starts and ends in its tokens, and the tokens' lines and columns."""

    def __init__(self, node: cst.CSTNode, module: cst.Module, indents: tuple[str, ...] = (), elif_: bool = False) -> None:
        state = _TokenSpans(
            default_indent=module.default_indent, default_newline=module.default_newline, indent_tokens=list(indents)
        )
        if elif_:
            node._codegen(state, is_elif=True)
        else:
            node._codegen(state)
        self.spans = state.spans
        self._tokens = state.tokens
        self._places: list[tuple[int, int]] | None = None  # with "\r" in the code: per token boundary
        self._offsets: list[int] | None = None
        self._line_ends: list[int] = []
        self.first_line = 1  # the line the code starts on

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        start, end = self.spans[node]
        return CodeRange(self.place(start), self.place(end))

    def place(self, index: int) -> CodePosition:
        """Line and column after the first `index` tokens, as libcst counts them: newlines
        token by token."""
        if self._offsets is None:
            self._index()
        if self._places is not None:
            line, column = self._places[index]
            return CodePosition(line + self.first_line - 1, column)
        offset = self._offsets[index]
        line = bisect_right(self._line_ends, offset)
        column = offset - (self._line_ends[line - 1] if line else 0)
        return CodePosition(line + self.first_line, column)

    def _index(self) -> None:
        self._offsets = list(accumulate(map(len, self._tokens), initial=0))
        code = "".join(self._tokens)
        if "\r" not in code:
            # Only "\n": no newline can straddle two tokens, so the joined code counts alike.
            self._line_ends = [match.end() for match in re.finditer("\n", code)]
            return
        places = [(1, 0)]
        line, column = 1, 0
        for token in self._tokens:
            segments = _NEWLINE.split(token)
            if len(segments) == 1:
                column += len(token)
            else:
                line += len(segments) - 1
                column = len(segments[-1])
            places.append((line, column))
        self._places = places


class Positions:
    """`PositionProvider`'s range of any node of a module (`lines`: its `statement_lines`;
    `known_holders`: the innermost statement of some nodes, as a traversal saw them, which
    spares finding it for those)."""

    def __init__(
        self, module: cst.Module, lines: StatementLines | None = None,
        known_holders: Mapping[cst.CSTNode, cst.CSTNode] | None = None,
    ) -> None:
        self._module = module
        self._whole: _Code | None = None
        self._lines = lines
        self._statements: dict[cst.CSTNode, _Anchor] | None = None
        self._known_holders = known_holders or {}
        self._holders: dict[cst.CSTNode, cst.CSTNode] | None = None
        self._codes: dict[cst.CSTNode, _Code] = {}

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        code = self._code_holding(node) if self._lines is not None else None
        if code is None:
            if self._whole is None:
                self._whole = _Code(self._module, self._module)
            code = self._whole
        return code[node]

    def _code_holding(self, node: cst.CSTNode) -> _Code | None:
        if self._statements is None:
            self._statements = {}
            try:
                _pair(self._module.body, self._lines, (), self._module.default_indent, self._statements)
            except _Mismatch:
                self._lines, self._statements = None, {}
                return None
        statement = node if node in self._statements else self._known_holders.get(node)
        if statement is None or statement not in self._statements:
            if self._holders is None:
                self._holders = _holders(self._statements)
            statement = self._holders.get(node)
            if statement is None:
                return None
        code = self._codes.get(statement)
        if code is None:
            line, indents, elif_ = self._statements[statement]
            code = self._codes[statement] = _Code(statement, self._module, indents, elif_)
            code.first_line = line - code.place(code.spans[statement][0]).line + 1
        return code


def _holders(statements: dict[cst.CSTNode, object]) -> dict[cst.CSTNode, cst.CSTNode]:
    """The innermost statement of `statements` holding each node below one."""
    holders: dict[cst.CSTNode, cst.CSTNode] = {}
    for statement in statements:
        holders[statement] = statement
        pending = child_nodes(statement)
        while pending:
            node = pending.pop()
            if node not in statements:
                holders[node] = statement
                pending.extend(child_nodes(node))
    return holders
