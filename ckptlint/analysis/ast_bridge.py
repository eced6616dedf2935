"""From the `ast` nodes the project model speaks of to the libcst nodes a rule reports and
fixes (`FileContext.cst_node_at`), for one file.

The statements of the two trees pair up block by block (a line of small statements,
`a = 1; b = 2`, is one libcst statement holding one `ast` statement per small statement;
`if x: y()` holds its body on the header's line). An expression is found in the libcst
statement paired with the `ast` statement holding it, as the innermost node of the asked
type whose range (`FileContext.position`, libcst's own) holds the expression's: a libcst
node's range includes its parentheses, an `ast` node's does not, and `ast` counts columns
in UTF-8 bytes where libcst counts characters.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.cst_walk import _child_fields, child_nodes

if TYPE_CHECKING:
    from libcst.metadata import CodeRange

_NEWLINE = re.compile(r"\r\n?|\n")
_TRY = (ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
# The blocks of a compound statement: the statements in them are paired on their own.
_BLOCKS = ("IndentedBlock", "SimpleStatementSuite")

Span = tuple[tuple[int, int], tuple[int, int]]  # ((line, column), (end line, end column)), characters


class _Mismatch(Exception):
    """The two trees' statements do not pair up (a tree of another text)."""


class BridgedFile(Protocol):
    """What the bridge reads of a file (`ckptlint.rule.FileContext` is one)."""

    text: str
    module: cst.Module

    def position(self, node: cst.CSTNode) -> CodeRange: ...


class AstBridge:
    """The libcst node of an `ast` node of the same file's text, built on first use."""

    def __init__(self, context: BridgedFile, tree: ast.Module) -> None:
        self._context = context
        # id of an `ast` statement -> (its libcst statement, the line of small statements holding it)
        self._statements: dict[int, tuple[cst.CSTNode, cst.SimpleStatementLine | None]] = {}
        self._holders: dict[int, ast.stmt] = {}  # id of an `ast` expression -> its statement
        self._lines = _NEWLINE.split(context.text)
        self._ranges: dict[tuple[cst.CSTNode, object], list[tuple[cst.CSTNode, Span]]] = {}
        try:
            _pair_body(context.module.body, tree.body, self._statements)
        except _Mismatch:
            self._statements = {}
        for statement in _statements_of(tree):
            for node in _own_nodes(statement):
                self._holders[id(node)] = statement
        self._tree = tree  # the ids above are those of its nodes: keep them alive

    def cst_node_at(self, node: ast.AST | None, cst_type: type | tuple[type, ...]) -> cst.CSTNode | None:
        """The libcst node of type `cst_type` that `node` is (None: none, or a node of
        another tree): a statement's own, the line of small statements holding it
        (`cst.SimpleStatementLine`, None on a header's line), or the innermost node whose
        range holds an expression's."""
        if node is None:
            return None
        if isinstance(node, ast.stmt):
            paired = self._statements.get(id(node))
            if paired is None:
                return None
            statement, line = paired
            if cst_type is cst.SimpleStatementLine:
                return line
            if isinstance(statement, cst_type):
                return statement
            holder = statement
        else:
            holder_ast = self._holders.get(id(node))
            paired = self._statements.get(id(holder_ast)) if holder_ast is not None else None
            if paired is None:
                return None
            holder = paired[0]
        span = self._span(node)
        if span is None:
            return None
        found, found_span = None, None
        for candidate, candidate_span in self._candidates(holder, cst_type):
            if candidate_span[0] <= span[0] and span[1] <= candidate_span[1] and (
                found_span is None or (found_span[0] <= candidate_span[0] and candidate_span[1] <= found_span[1])
            ):
                found, found_span = candidate, candidate_span  # later candidates lie deeper: ties go to them
        return found

    def _candidates(self, holder: cst.CSTNode, cst_type) -> list[tuple[cst.CSTNode, Span]]:
        """The nodes of `cst_type` in a statement (outside its blocks) with their ranges,
        outer ones first."""
        key = (holder, cst_type)
        found = self._ranges.get(key)
        if found is None:
            found = []
            for candidate in _nodes_of(holder, cst_type):
                position = self._context.position(candidate)
                found.append((candidate, ((position.start.line, position.start.column), (position.end.line, position.end.column))))
            self._ranges[key] = found
        return found

    def _span(self, node: ast.AST) -> Span | None:
        if getattr(node, "end_lineno", None) is None:
            return None
        return ((node.lineno, self._column(node.lineno, node.col_offset)),
                (node.end_lineno, self._column(node.end_lineno, node.end_col_offset)))

    def _column(self, line: int, byte_offset: int) -> int:
        text = self._lines[line - 1] if 0 < line <= len(self._lines) else ""
        if text.isascii():
            return byte_offset
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace"))


def _pair_body(statements, body: list[ast.stmt], found: dict) -> None:
    index = 0
    for statement in statements:
        if isinstance(statement, cst.SimpleStatementLine):
            for _small in statement.body:
                if index >= len(body):
                    raise _Mismatch
                found[id(body[index])] = (_small, statement)
                index += 1
            continue
        if index >= len(body):
            raise _Mismatch
        found[id(body[index])] = (statement, None)
        _pair_blocks(statement, body[index], found)
        index += 1
    if index != len(body):
        raise _Mismatch


def _pair_block(block, body: list[ast.stmt], found: dict) -> None:
    if isinstance(block, cst.IndentedBlock):
        _pair_body(block.body, body, found)
    elif isinstance(block, cst.SimpleStatementSuite):  # `if x: y(); z()`
        if len(block.body) != len(body):
            raise _Mismatch
        for small, statement in zip(block.body, body):
            found[id(statement)] = (small, None)
    else:
        raise _Mismatch


def _pair_blocks(statement: cst.CSTNode, node: ast.stmt, found: dict) -> None:
    if isinstance(statement, cst.If):
        if not isinstance(node, ast.If):
            raise _Mismatch
        _pair_block(statement.body, node.body, found)
        orelse = statement.orelse
        if isinstance(orelse, cst.If):  # `elif`: the `ast` `orelse` holds its `If`
            if len(node.orelse) != 1:
                raise _Mismatch
            found[id(node.orelse[0])] = (orelse, None)
            _pair_blocks(orelse, node.orelse[0], found)
        elif orelse is not None:
            _pair_block(orelse.body, node.orelse, found)
        elif node.orelse:
            raise _Mismatch
    elif isinstance(statement, (cst.For, cst.While)):
        _pair_block(statement.body, node.body, found)
        if statement.orelse is not None:
            _pair_block(statement.orelse.body, node.orelse, found)
    elif isinstance(statement, cst.Try) or type(statement).__name__ == "TryStar":
        if not isinstance(node, _TRY) or len(statement.handlers) != len(node.handlers):
            raise _Mismatch
        _pair_block(statement.body, node.body, found)
        for handler, ast_handler in zip(statement.handlers, node.handlers):
            _pair_block(handler.body, ast_handler.body, found)
        if statement.orelse is not None:
            _pair_block(statement.orelse.body, node.orelse, found)
        if statement.finalbody is not None:
            _pair_block(statement.finalbody.body, node.finalbody, found)
    elif isinstance(statement, (cst.With, cst.FunctionDef, cst.ClassDef)):
        _pair_block(statement.body, node.body, found)
    elif isinstance(statement, cst.Match):
        if not isinstance(node, ast.Match) or len(statement.cases) != len(node.cases):
            raise _Mismatch
        for case, ast_case in zip(statement.cases, node.cases):
            _pair_block(case.body, ast_case.body, found)


def _statements_of(tree: ast.AST):
    """Every statement of the tree."""
    pending = [tree]
    while pending:
        node = pending.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield child
            pending.append(child)


def _own_nodes(statement: ast.stmt):
    """The nodes of a statement outside the statements it holds."""
    pending = [child for child in ast.iter_child_nodes(statement) if not isinstance(child, ast.stmt)]
    while pending:
        node = pending.pop()
        yield node
        pending.extend(child for child in ast.iter_child_nodes(node) if not isinstance(child, ast.stmt))


def _nodes_of(statement: cst.CSTNode, cst_type) -> list[cst.CSTNode]:
    """The nodes of `cst_type` in a statement outside its blocks, outer ones first."""
    found = []
    pending = deque([statement])
    while pending:
        node = pending.popleft()
        if isinstance(node, cst_type):
            found.append(node)
        pending.extend(child for child in child_nodes(node) if type(child).__name__ not in _BLOCKS)
    return found


# --- expressions the other way: a libcst name, attribute or call to its `ast` node ----------

# libcst `Name` nodes in these fields are no `ast.Name` (a keyword, a parameter, a definition's
# name, an attribute's); imports and `global` / `nonlocal` hold none either.
_NAME_FIELDS = {
    "Attribute": ("attr",), "Arg": ("keyword",), "Param": ("name",), "FunctionDef": ("name",),
    "ClassDef": ("name",), "ExceptHandler": ("name",), "ExceptStarHandler": ("name",), "MatchAs": ("name",),
    "MatchStar": ("name",), "MatchMapping": ("rest",), "MatchKeywordElement": ("key",),
}
_NO_EXPRESSIONS = frozenset({"Import", "ImportFrom", "Global", "Nonlocal"})
_CONSTANT_NAMES = frozenset({"True", "False", "None"})  # `ast.Constant`s
_PAIRED_TYPES = (ast.Name, ast.Attribute, ast.Call)


class ExpressionPairs:
    """Each libcst `Name`, `Attribute` and `Call` of an expression with the `ast` node it is,
    and each `ast.Name` with its libcst `Name`, in both trees of one text.

    The two trees hold the same names, attributes and calls in the same order: libcst's
    children are in source order, so its nodes of one kind come in pre-order as CPython's
    come sorted by where they start (an enclosing one first: `a.b.c` before `a.b`). Pairing
    them so needs no positions (computing libcst's for every call of a large file costs five
    times its traversal). Each pair is checked (a name's text, an attribute's); `mismatch`
    says why the trees did not pair up, and then nothing is paired."""

    def __init__(self, module: cst.Module, tree: ast.Module) -> None:
        self.mismatch: str | None = None
        self._ast_of: dict[cst.CSTNode, ast.expr] = {}
        self._names: tuple[list[cst.Name], list[ast.Name]] = ([], [])
        self._cst_name_of: dict[int, cst.Name] | None = None
        libcst_nodes: dict[type, list] = {cst.Name: [], cst.Attribute: [], cst.Call: []}
        _collect(module, libcst_nodes)
        ast_nodes: dict[type, list] = {kind: [] for kind in _PAIRED_TYPES}
        _collect_ast(tree, ast_nodes)
        for kind in _PAIRED_TYPES:
            ast_nodes[kind].sort(key=_start_then_outer)
        (names, attributes, calls), (ast_names, ast_attributes, ast_calls) = libcst_nodes.values(), ast_nodes.values()
        if len(names) != len(ast_names) or len(attributes) != len(ast_attributes) or len(calls) != len(ast_calls):
            self.mismatch = "the trees hold different numbers of names, attributes or calls"
        elif [name.value for name in names] != [name.id for name in ast_names]:
            self.mismatch = "the trees' names differ"
        elif [node.attr.value for node in attributes] != [node.attr for node in ast_attributes]:
            self.mismatch = "the trees' attributes differ"
        else:
            self._ast_of = dict(zip(names, ast_names))
            self._ast_of.update(zip(attributes, ast_attributes))
            self._ast_of.update(zip(calls, ast_calls))
            self._names = (names, ast_names)
        self._tree = tree  # ids of its nodes are keys below: keep them alive

    def ast_node(self, node: cst.CSTNode) -> ast.expr | None:
        """The `ast` node of a libcst name, attribute or call (None: none, or unpaired)."""
        return self._ast_of.get(node)

    def calls(self) -> Iterator[tuple[cst.Call, ast.Call]]:
        """Every libcst call with its `ast` call, in pre-order (none when unpaired)."""
        for cst_node, ast_node in self._ast_of.items():
            if ast_node.__class__ is ast.Call:
                yield cst_node, ast_node

    def cst_name(self, node: ast.Name) -> cst.Name | None:
        """The libcst `Name` of an `ast.Name`."""
        if self._cst_name_of is None:
            names, ast_names = self._names
            self._cst_name_of = {id(ast_name): name for name, ast_name in zip(names, ast_names)}
        return self._cst_name_of.get(id(node))


def _start_then_outer(node: ast.expr) -> tuple[int, int, int, int]:
    return node.lineno, node.col_offset, -node.end_lineno, -node.end_col_offset


def _collect(root: cst.CSTNode, found: dict[type, list[cst.CSTNode]]) -> None:
    """libcst's names, attributes and calls that are `ast` expressions, in pre-order."""
    names, attributes, calls = found[cst.Name], found[cst.Attribute], found[cst.Call]
    leaves = _leaves()
    pending = [root]
    while pending:
        node = pending.pop()
        kind = node.__class__
        if kind is cst.Name:
            if node.value not in _CONSTANT_NAMES:
                names.append(node)
            continue
        fields = _FIELDS.get(kind)
        if fields is None:
            fields = _FIELDS[kind] = _expression_fields(kind)
        if kind is cst.Attribute:
            attributes.append(node)
        elif kind is cst.Call:
            calls.append(node)
        children = []
        for field in fields:
            value = getattr(node, field)
            if value.__class__ is tuple:
                children.extend(child for child in value if child.__class__ not in leaves)
            elif value.__class__ not in leaves:
                children.append(value)
        pending.extend(reversed(children))


# Per libcst class, the fields that may hold expressions, in libcst's order.
_FIELDS: dict[type, tuple[str, ...]] = {}


def _expression_fields(kind: type) -> tuple[str, ...]:
    if kind.__name__ in _NO_EXPRESSIONS:
        return ()
    skipped = _NAME_FIELDS.get(kind.__name__, ())
    return tuple(name for name, _ in _child_fields(kind) if name not in skipped)


@functools.cache
def _leaves() -> frozenset[type]:
    """libcst classes that hold no expression: whitespace, punctuation, operators, literals,
    and what field values are when unset."""
    import libcst._nodes.op as op
    import libcst._nodes.whitespace as whitespace
    from libcst._maybe_sentinel import MaybeSentinel

    found = {type(None), MaybeSentinel, str}
    for namespace in (op, whitespace):
        found.update(
            value for value in vars(namespace).values()
            if isinstance(value, type) and issubclass(value, cst.CSTNode) and value.__module__ == namespace.__name__
        )
    found.update((cst.SimpleString, cst.Integer, cst.Float, cst.Imaginary, cst.Ellipsis, cst.FormattedStringText))
    return frozenset(found)


# Per `ast` class, the fields that may hold expressions.
_AST_FIELDS: dict[type, tuple[str, ...]] = {}


def _collect_ast(tree: ast.Module, found: dict[type, list]) -> None:
    """The tree's names, attributes and calls (in no order)."""
    pending: list = [tree]
    while pending:
        node = pending.pop()
        kind = node.__class__
        bucket = found.get(kind)
        if bucket is not None:
            bucket.append(node)
            if kind is ast.Name:
                continue
        fields = _AST_FIELDS.get(kind)
        if fields is None:
            fields = _AST_FIELDS[kind] = tuple(name for name in kind._fields if name not in ("ctx", "op", "ops"))
        for field in fields:
            value = getattr(node, field, None)
            if value.__class__ is list:
                pending.extend(child for child in value if isinstance(child, ast.AST))
            elif isinstance(value, ast.AST):
                pending.append(value)
