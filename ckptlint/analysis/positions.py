"""Where nodes are in the file: libcst's `PositionProvider` ranges, computed for less.

libcst's provider follows the line and column through every token of the code it
generates and builds a `CodeRange` for every node of the module (and first walks the
whole tree once for its batchable providers, of which there are none here). A file
usually needs a few positions: here the code generation records only where, in its
tokens, each node starts and ends; a range becomes lines and columns when asked for.
The ranges are libcst's own (`tests/test_positions.py` compares them for every node).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from itertools import accumulate

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import CodePosition, CodeRange

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


class Positions:
    """`PositionProvider`'s range of any node of a module."""

    def __init__(self, module: cst.Module) -> None:
        state = _TokenSpans(default_indent=module.default_indent, default_newline=module.default_newline)
        module._codegen(state)
        self._spans = state.spans
        self._tokens = state.tokens
        self._places: list[tuple[int, int]] | None = None  # with "\r" in the code: per token boundary
        self._offsets: list[int] | None = None
        self._line_ends: list[int] = []

    def __getitem__(self, node: cst.CSTNode) -> CodeRange:
        start, end = self._spans[node]
        return CodeRange(self._place(start), self._place(end))

    def _place(self, index: int) -> CodePosition:
        """Line and column after the first `index` tokens, as libcst counts them: newlines
        token by token."""
        if self._offsets is None:
            self._index()
        if self._places is not None:
            line, column = self._places[index]
            return CodePosition(line, column)
        offset = self._offsets[index]
        line = bisect_right(self._line_ends, offset)
        column = offset - (self._line_ends[line - 1] if line else 0)
        return CodePosition(line + 1, column)

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
