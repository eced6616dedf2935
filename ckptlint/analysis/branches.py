"""Which `if` branches a call of a libcst tree sits in, and what their tests require, in the
form of `ckptlint.model.form.branching` (which says whether two calls can both run), as the
project model reads them on the `ast` tree: for the rules that pair two calls on one model
(CKPT003, CKPT010, CKPT002's FSDP branches)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.model.form.branching import Branches, Conditions, exclusive
from ckptlint.model.script_models.syntax import SourceText, branch_paths as model_branch_paths

if TYPE_CHECKING:
    from ckptlint.rule import FileContext


def literal_truth(expr: cst.BaseExpression, known: Conditions = ()) -> bool | None:
    """The truth of a literal (`False`, `None`, `0`, `"x"`), or of a name `known` says the
    truth of; None when it is not known here."""
    if isinstance(expr, cst.Name):
        if expr.value in ("True", "False", "None"):
            return expr.value == "True"
        return dict(known).get(expr.value)
    if isinstance(expr, (cst.Integer, cst.Float)):
        return bool(expr.evaluated_value)
    if isinstance(expr, cst.SimpleString):
        return bool(expr.evaluated_value)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = literal_truth(expr.expression, known)
        return None if inner is None else not inner
    return None


@dataclass(frozen=True)
class BranchPath:
    branches: Branches = ()
    conditions: Conditions = ()

    def exclusive_with(self, other: BranchPath) -> bool:
        return exclusive(self.branches, self.conditions, other.branches, other.conditions)


def branch_paths(context: FileContext) -> dict[cst.Call, BranchPath]:
    """The branch path of every call of the file, by its libcst node: the project model's,
    read on the `ast` tree (`script_models.syntax.branch_paths`) and brought to libcst
    through the file's expression pairs. A call of a file only libcst parses has none (it
    is not known to be exclusive with any other). Computed once per parse."""
    return context.once(_branch_paths)


def _branch_paths(context: FileContext) -> dict[cst.Call, BranchPath]:
    pairs = context.names.pairs
    if pairs is None:
        return {}
    paths = model_branch_paths(context.ast_module, SourceText(context.text))
    return {call: BranchPath(*paths[id(node)]) for call, node in pairs.calls()}


def leaving_isinstance_guard(node: cst.If) -> tuple[str, cst.BaseExpression] | None:
    """(name, classes) of `if isinstance(name, classes):` whose body always leaves (raise,
    return, continue, break) and that has no `else`: what the statements after it know
    `name` is not."""
    test = node.test
    if not (
        node.orelse is None
        and isinstance(test, cst.Call)
        and isinstance(test.func, cst.Name)
        and test.func.value == "isinstance"
        and len(test.args) == 2
        and isinstance(test.args[0].value, cst.Name)
        and not any(arg.keyword or arg.star for arg in test.args)
    ):
        return None
    body = node.body.body
    last = body[-1] if body else None
    if isinstance(last, cst.SimpleStatementLine):
        last = last.body[-1] if last.body else None
    if not isinstance(last, (cst.Raise, cst.Return, cst.Continue, cst.Break)):
        return None
    return test.args[0].value.value, test.args[1].value
