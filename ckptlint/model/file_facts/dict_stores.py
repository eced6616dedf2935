"""What code stores into a dict under a literal key, for the summaries (`ckptlint.model.file_facts.code`):
`d["key"] = v`, `d.update(key=v)`, `d.update({"key": v})`, `d.setdefault("key", v)`. The
value is kept with its key (`("item", key, value)`, an `append` binding's value), so that a
`**d` splat of the dict later passes it (`ckptlint.model.evaluation.containers._with_added_members`):
`kwargs["norm_layer"] = nn.BatchNorm2d; Block(**kwargs)`, timm's `EfficientNetBuilder`."""

from __future__ import annotations

import ast

from ckptlint.model.file_facts.ast_expressions import expression, pattern
from ckptlint.model.form.summary import ADD, ITEM, Binding, Conditions, Expr


def keyed_value(target: ast.Subscript, value: Expr) -> Expr:
    """The value a subscript assignment stores, with its key when that is a literal string."""
    key = target.slice
    if isinstance(key, ast.Constant) and isinstance(key.value, str):
        return (ITEM, key.value, value)
    return value


def dict_stores(call: ast.Call, conditions: Conditions = ()) -> list[Binding]:
    """`d.update(key=v)`, `d.update({"key": v})`, `d.setdefault("key", v)`: values stored
    under literal keys, as `d["key"] = v` stores them (`ITEM`); `d.update(other)` with
    `other` not a literal dict, an addition of keys not known (as `append`: a `**d` of it
    passes keys the model does not know)."""
    func = call.func
    if not (
        isinstance(func, ast.Attribute) and func.attr in ("update", "setdefault")
        and isinstance(func.value, (ast.Name, ast.Attribute))
    ):
        return []  # (every call of every summarised function comes here)

    target, line = pattern(func.value), call.lineno
    stored: list[tuple[str | None, ast.AST]] = []  # (literal key, value); None: keys not known
    if func.attr == "setdefault" and len(call.args) == 2 and not call.keywords:
        key = call.args[0]
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            stored.append((key.value, call.args[1]))
    elif func.attr == "update" and len(call.args) <= 1:
        for argument in call.args:
            if isinstance(argument, ast.Dict) and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in argument.keys):
                stored.extend((key.value, value) for key, value in zip(argument.keys, argument.values))
            else:
                stored.append((None, argument))
        stored.extend((keyword.arg, keyword.value) for keyword in call.keywords)
    bindings = []
    for key, node in stored:
        value = expression(node)
        if value[0] == "?":
            continue
        bindings.append(Binding(target, ADD, (ITEM, key, value) if key is not None else value, line, 0, conditions))
    return bindings
