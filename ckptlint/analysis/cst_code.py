"""libcst expressions in the summary form of `ckptlint.model.file_facts.code`, so that an expression a
rule holds (the callable a checkpoint call is given) is evaluated by the same model as the
code the project index summarised with `ast`."""

from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.cst_walk import walk
from ckptlint.model.form.summary import LIST, MAX_DEPTH, UNKNOWN, Expr, slice_key


def expression(node: cst.BaseExpression | None, depth: int = 0) -> Expr:
    if node is None or depth > MAX_DEPTH:
        return UNKNOWN
    down = depth + 1
    if isinstance(node, cst.Name):
        if node.value in ("True", "False", "None"):
            return ("const", {"True": True, "False": False, "None": None}[node.value])
        return ("name", node.value)
    if isinstance(node, cst.Attribute):
        return ("attr", expression(node.value, down), node.attr.value)
    if isinstance(node, cst.Call):
        args = []
        keywords = []
        for arg in node.args:
            if arg.star == "**":
                keywords.append((None, expression(arg.value, down)))
            elif arg.star == "*":
                args.append(("star", expression(arg.value, down)))
            elif arg.keyword is not None:
                keywords.append((arg.keyword.value, expression(arg.value, down)))
            else:
                args.append(expression(arg.value, down))
        return ("call", expression(node.func, down), tuple(args), tuple(keywords))
    if isinstance(node, cst.Subscript):
        key = None
        if len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Index):
            key = expression(node.slice[0].slice.value, down)
        elif len(node.slice) == 1 and isinstance(node.slice[0].slice, cst.Slice):
            part = node.slice[0].slice
            key = slice_key([_bound(bound) for bound in (part.lower, part.upper, part.step)])
        return ("index", expression(node.value, down), key)
    if isinstance(node, (cst.List, cst.Tuple, cst.Set)):
        elements = tuple(
            ("star", expression(e.value, down)) if isinstance(e, cst.StarredElement) else expression(e.value, down)
            for e in node.elements
        )
        return ("seq", elements, LIST) if isinstance(node, cst.List) else ("seq", elements)
    if isinstance(node, cst.BooleanOperation):
        left, right = expression(node.left, down), expression(node.right, down)
        return ("or", (left, right)) if isinstance(node.operator, cst.Or) else right
    if isinstance(node, cst.IfExp):
        return ("if", expression(node.test, down), expression(node.body, down), expression(node.orelse, down))
    if isinstance(node, cst.Integer):
        return ("const", int(node.evaluated_value))
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Minus) and isinstance(node.expression, cst.Integer):
        return ("const", -int(node.expression.evaluated_value))
    if isinstance(node, cst.UnaryOperation) and isinstance(node.operator, cst.Not):
        return ("not", expression(node.expression, down))
    if isinstance(node, cst.SimpleString):
        return ("const", node.evaluated_value)
    if isinstance(node, cst.Lambda):
        return ("lambda", _callees(node.body))
    if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)):
        if isinstance(node, cst.ListComp):
            return ("comp", expression(comprehension_element(node), down), generators(node, down), LIST)
        return ("comp", expression(comprehension_element(node), down), generators(node, down))
    return UNKNOWN


def comprehension_element(node: cst.BaseComp | cst.DictComp) -> cst.BaseExpression:
    return node.value if isinstance(node, cst.DictComp) else node.elt


def generators(node: cst.BaseComp | cst.DictComp, depth: int = 0) -> tuple[tuple[Expr, Expr], ...]:
    """A comprehension's `for` clauses, outermost first, as (target pattern, iterable): the
    form `ckptlint.model.file_facts.code` gives them."""
    found: list[tuple[Expr, Expr]] = []
    clause: cst.CompFor | None = node.for_in
    while clause is not None:
        found.append((pattern(clause.target, depth + 1), expression(clause.iter, depth + 1)))
        clause = clause.inner_for_in
    return tuple(found)


def pattern(node: cst.BaseExpression, depth: int = 0) -> Expr:
    """An assignment target (`block`, `name, block`) in the summary form."""
    if depth > MAX_DEPTH:
        return UNKNOWN
    if isinstance(node, cst.Name):
        return ("name", node.value)
    if isinstance(node, (cst.Tuple, cst.List)):
        return ("seq", tuple(
            ("star", pattern(e.value, depth + 1)) if isinstance(e, cst.StarredElement) else pattern(e.value, depth + 1)
            for e in node.elements
        ))
    if isinstance(node, (cst.Attribute, cst.Subscript)):
        return expression(node, depth + 1)
    return UNKNOWN


def _bound(node: cst.BaseExpression | None) -> int | None | bool:
    """A slice bound: an integer literal, None when absent, False when not a literal."""
    if node is None:
        return None
    value = expression(node)
    return value[1] if value[0] == "const" and type(value[1]) is int else False


def _callees(node: cst.CSTNode) -> tuple[Expr, ...]:
    """What a lambda's body calls (names and attribute chains: the modules and functions
    it runs)."""
    found: list[Expr] = []

    class Calls(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            callee = expression(call.func)
            if callee[0] in ("name", "attr") and callee not in found:
                found.append(callee)

        def visit_Lambda(self, inner: cst.Lambda) -> bool:
            return False

    walk(node, Calls())
    return tuple(found)


def dotted_text(expr: cst.BaseExpression) -> str | None:
    """`model`, `self.model`: a libcst name or attribute chain as written, else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        base = dotted_text(expr.value)
        return f"{base}.{expr.attr.value}" if base is not None else None
    return None
