"""In a test file each test is a program of its own: which FSDP uses of the file reach a
node of it (CKPT002 reports only where one does)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.model.syntax.names import is_test_function, is_test_path

if TYPE_CHECKING:
    from ckptlint.rule import FileContext


class ReachInTestFiles:
    """The tests of one file, their line spans found when first asked."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self._tests: list[tuple[int, int]] | None = None  # line spans of a test file's tests

    def reaches(self, node: cst.CSTNode) -> bool:
        """In a test file, each test is a program of its own: the file's FSDP counts for a
        test when it is in that test, at the module's top level, or in a helper or fixture
        (a function that is no test); a wrap in another test reaches nothing here."""
        if self.context.settings.fsdp != "auto" or not is_test_path(self.context.relative_path):
            return True
        tests = self._test_functions()
        line = self.context.position(node).start.line
        holder = next((span for span in tests if span[0] <= line <= span[1]), None)
        if holder is None:
            return True
        uses = [u for u in self.context.project.fsdp_uses_reaching(self.context.relative_path)
                if u.path == self.context.relative_path]
        return any(holder[0] <= u.line <= holder[1] or not any(s[0] <= u.line <= s[1] for s in tests) for u in uses)

    def _test_functions(self) -> list[tuple[int, int]]:
        """The line spans of the file's tests: `test_*` functions, and methods of test classes."""
        if self._tests is None:
            spans = []
            for statement in self.context.module.body:
                nodes = [statement]
                if isinstance(statement, cst.ClassDef):
                    nodes = [s for s in statement.body.body if isinstance(s, cst.FunctionDef)]
                for function in nodes:
                    if isinstance(function, cst.FunctionDef) and is_test_function(function.name.value):
                        position = self.context.position(function)
                        spans.append((position.start.line, position.end.line))
            self._tests = spans
        return self._tests
