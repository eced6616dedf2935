"""One text and CPython's tree of it, parsed on first use. The file being linted is read by
the index's extraction (its own facts, `ProjectIndex.with_file`) and by the rules' model
(`ckptlint.parsing.parse_module`): one parse serves both (for transformers' 5,000-line
`trainer.py`, a parse is 0.2 s of every edit's lint)."""

from __future__ import annotations

import ast


class ParsedText:
    def __init__(self, text: str) -> None:
        self.text = text
        self._tree: ast.Module | None = None
        self._error: BaseException | None = None

    def tree(self) -> ast.Module:
        """CPython's tree of the text; raises what `ast.parse` raised, every time it is asked.
        The tree is shared: its readers add nothing to it but caches of their walks
        (`ckptlint.model.syntax.ast_walk`)."""
        if self._tree is None:
            if self._error is not None:
                raise self._error
            try:
                self._tree = ast.parse(self.text)
            except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
                self._error = error
                raise
        return self._tree
