"""Which `if` branches a call of a libcst tree sits in, and what their tests require, in the
form of `ckptlint.model.form.branching` (which says whether two calls can both run): for the rules
that pair two steps on one model (CKPT003, CKPT005)."""

from __future__ import annotations

from dataclasses import dataclass

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.cst_walk import walk
from ckptlint.model.form.branching import Branches, Conditions, exclusive

# By the operator's class name (libcst is imported only once a file is analysed).
_COMPARISONS = {
    "Equal": ("==", True), "NotEqual": ("==", False), "Is": ("is", True), "IsNot": ("is", False),
    "In": ("in", True), "NotIn": ("in", False),
}


def condition_literals(test: cst.BaseExpression, truth: bool) -> Conditions:
    """What `test` being `truth` says, as a conjunction of (condition, truth) pairs."""
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return condition_literals(test.expression, not truth)
    if isinstance(test, cst.BooleanOperation):
        # `a and b` true, or `a or b` false: each side is known.
        if isinstance(test.operator, cst.And) == truth:
            return condition_literals(test.left, truth) + condition_literals(test.right, truth)
    if isinstance(test, cst.Comparison) and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        operator = _COMPARISONS.get(type(comparison.operator).__name__)
        if operator is not None:
            atom = f"{_source(test.left)} {operator[0]} {_source(comparison.comparator)}"
            return ((atom, truth == operator[1]),)
    return ((_source(test), truth),)


def _source(expr: cst.BaseExpression) -> str:
    plain = _plain_dotted(expr, outermost=True)
    if plain is not None:
        return plain
    bare = expr.with_changes(lpar=(), rpar=()) if getattr(expr, "lpar", None) else expr
    return cst.Module([]).code_for_node(bare)


def _plain_dotted(expr: cst.BaseExpression, outermost: bool = False) -> str | None:
    """The code of `a` or `a.b.c` written without spaces or parentheses inside (the outermost
    ones are dropped anyway), without generating it: most `if` tests the interpreter meets."""
    if not outermost and (getattr(expr, "lpar", None) or getattr(expr, "rpar", None)):
        return None
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        dot = expr.dot
        if not all(isinstance(w, cst.SimpleWhitespace) and not w.value for w in (dot.whitespace_before, dot.whitespace_after)):
            return None
        base = _plain_dotted(expr.value)
        return f"{base}.{expr.attr.value}" if base is not None else None
    return None


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


def branch_paths(module: cst.Module) -> dict[cst.Call, BranchPath]:
    """The branch path of every call of a module."""
    found: dict[cst.Call, BranchPath] = {}
    enclosing: list[tuple[tuple[int, int], Conditions]] = []

    class BranchVisitor(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> bool:
            walk(node.test, self)
            for index, (block, truth) in enumerate(((node.body, True), (node.orelse, False))):
                if block is not None:
                    enclosing.append(((id(node), index), condition_literals(node.test, truth)))
                    walk(block, self)
                    enclosing.pop()
            return False  # its children are visited above, each in its branch

        def visit_Call(self, node: cst.Call) -> None:
            found[node] = BranchPath(tuple(key for key, _ in enclosing), tuple(c for _, cs in enclosing for c in cs))

    walk(module, BranchVisitor())
    return found


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
