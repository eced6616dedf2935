"""CPython's `ast` expressions in the summary form (`ckptlint.model.form.summary`): an
expression, an assignment target, an `if` test. Expressions nested deeper than `MAX_DEPTH`
are `("?",)`. Shared by the summaries (`ckptlint.model.file_facts.code`) and what they record of dict
stores (`ckptlint.model.file_facts.dict_stores`)."""

from __future__ import annotations

import ast

from ckptlint.model.form.summary import LIST, MAX_DEPTH, UNKNOWN, Expr, slice_key


def _integer(node: ast.AST | None) -> int | None | bool:
    """A slice bound: an integer literal, None when absent, False when not a literal."""
    if node is None:
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _integer(node.operand)
        return -inner if isinstance(inner, int) and not isinstance(inner, bool) else False
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    return False


def expression(node: ast.AST | None, depth: int = 0) -> Expr:
    """The summary form of an expression."""
    if node is None or depth > MAX_DEPTH:
        return UNKNOWN
    down = depth + 1
    if isinstance(node, ast.Name):
        return ("name", node.id)
    if isinstance(node, ast.Attribute):
        return ("attr", expression(node.value, down), node.attr)
    if isinstance(node, ast.Call):
        args = tuple(
            ("star", expression(arg.value, down)) if isinstance(arg, ast.Starred) else expression(arg, down)
            for arg in node.args
        )
        keywords = tuple((k.arg, expression(k.value, down)) for k in node.keywords)
        return ("call", expression(node.func, down), args, keywords)
    if isinstance(node, ast.Subscript):
        if isinstance(node.slice, ast.Slice):
            key = slice_key([_integer(part) for part in (node.slice.lower, node.slice.upper, node.slice.step)])
        else:
            key = None if isinstance(node.slice, ast.Tuple) else expression(node.slice, down)
        return ("index", expression(node.value, down), key)
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        elements = tuple(
            ("star", expression(e.value, down)) if isinstance(e, ast.Starred) else expression(e, down) for e in node.elts
        )
        return ("seq", elements, LIST) if isinstance(node, ast.List) else ("seq", elements)
    if isinstance(node, ast.Dict):
        return ("dict", tuple(
            (k.value if isinstance(k, ast.Constant) and isinstance(k.value, (str, int)) else None, expression(v, down))
            for k, v in zip(node.keys, node.values)
            if k is None or isinstance(k, ast.Constant)
        ))
    if isinstance(node, ast.BoolOp):
        values = tuple(expression(v, down) for v in node.values)
        return ("or", values) if isinstance(node.op, ast.Or) else values[-1]
    if isinstance(node, ast.IfExp):
        return ("if", condition(node.test, down), expression(node.body, down), expression(node.orelse, down))
    if isinstance(node, ast.Constant) and (node.value is None or isinstance(node.value, (bool, int, float, str))):
        return ("const", node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        if isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
            return ("const", -node.operand.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ("not", expression(node.operand, down))
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
        generators = tuple((pattern(g.target, down), expression(g.iter, down)) for g in node.generators)
        if isinstance(node, ast.ListComp):
            return ("comp", expression(node.elt, down), generators, LIST)
        return ("comp", expression(node.elt, down), generators)
    if isinstance(node, ast.DictComp):
        generators = tuple((pattern(g.target, down), expression(g.iter, down)) for g in node.generators)
        return ("comp", expression(node.value, down), generators)
    if isinstance(node, ast.Starred):
        return ("star", expression(node.value, down))
    if isinstance(node, ast.NamedExpr):
        return expression(node.value, down)
    if isinstance(node, ast.Lambda):
        return ("lambda", _callees(node.body))
    return UNKNOWN


def _callees(body: ast.AST) -> tuple[Expr, ...]:
    """What a lambda's body calls, in the order written, each once: the names and attribute
    chains of the modules and functions it runs (not those of a lambda inside it)."""
    found: list[Expr] = []
    pending = [body]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Call):
            callee = expression(node.func)
            if callee[0] in ("name", "attr") and callee not in found:
                found.append(callee)
        pending.extend(reversed(list(ast.iter_child_nodes(node))))
    return tuple(found)


def pattern(node: ast.AST, depth: int = 0) -> Expr:
    if depth > MAX_DEPTH:
        return UNKNOWN
    if isinstance(node, ast.Name):
        return ("name", node.id)
    if isinstance(node, (ast.Tuple, ast.List)):
        return ("seq", tuple(pattern(e, depth + 1) for e in node.elts))
    if isinstance(node, ast.Starred):
        return ("star", pattern(node.value, depth + 1))
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        return expression(node, depth + 1)
    return UNKNOWN


def condition(node: ast.AST, depth: int = 0) -> Expr:
    """An `if` test in the summary form: comparisons, `not`, `and` / `or` kept."""
    if depth > MAX_DEPTH:
        return UNKNOWN
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        operator = _COMPARISONS.get(type(node.ops[0]))
        if operator is not None:
            return ("cmp", operator, expression(node.left, depth + 1), expression(node.comparators[0], depth + 1))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return ("not", condition(node.operand, depth + 1))
    if isinstance(node, ast.BoolOp):
        return ("and" if isinstance(node.op, ast.And) else "any", tuple(condition(v, depth + 1) for v in node.values))
    return expression(node, depth + 1)


_COMPARISONS = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
}
