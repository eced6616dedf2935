"""Small readings of call and target syntax that the extraction uses: a name or attribute
chain as written, a call's keyword, the definitions of a body, what a `for` iterates over,
the names a target binds, literal flags and lists, the FSDP and Hugging Face checkpointing
keywords of a call."""

from __future__ import annotations

import ast

from collections.abc import Iterator, Sequence

from ckptlint.model.syntax.ast_walk import statements, walk


def dotted(expr: ast.AST | None) -> str | None:
    """`model`, `self.model.config`: a name or attribute chain as written, else None."""
    parts: list[str] = []
    while isinstance(expr, ast.Attribute):
        parts.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    return ".".join([expr.id, *reversed(parts)])


def definitions(body: Sequence[ast.stmt]) -> Iterator[ast.AST]:
    """The functions and classes a body defines, in its nested blocks too (a definition
    under `if` / `try` is still one), not those inside other definitions."""
    for statement in statements(body):
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield statement


def keyword_argument(call: ast.Call, name: str) -> ast.AST | None:
    for keyword in call.keywords:
        if keyword.arg == name:
            return keyword.value
    return None


def default_checkpointing_kwargs(call: ast.Call) -> bool:
    """`gradient_checkpointing_enable()` (or `gradient_checkpointing_kwargs=None`): the kwargs
    are transformers' default for the version."""
    if any(isinstance(arg, ast.Starred) for arg in call.args) or any(k.arg is None for k in call.keywords):
        return False
    value = call.args[0] if call.args else keyword_argument(call, "gradient_checkpointing_kwargs")
    return value is None or (isinstance(value, ast.Constant) and value.value is None)


def iterated_root(expr: ast.AST) -> str | None:
    """The object an expression is part of: `model.layers[i]` -> `model`,
    `self.model.layers` -> `self.model`, `model.named_children()` -> `model`."""
    while True:
        if isinstance(expr, ast.Subscript):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            expr = expr.func.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in ("enumerate", "list", "reversed", "zip") and expr.args:
            expr = expr.args[0]
        elif isinstance(expr, ast.Attribute):
            written = dotted(expr)
            if written is not None:
                head = written.split(".")
                return ".".join(head[:2]) if head[0] == "self" else head[0]
            expr = expr.value
        elif isinstance(expr, ast.Name):
            return expr.id
        else:
            return None


def bound_names(target: ast.AST) -> list[str]:
    return [node.id for node in walk(target) if isinstance(node, ast.Name)]


def is_none(expr: ast.AST) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is None


def is_truthy_literal(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and bool(expr.value) and expr.value is not None


def listed_strings(expr: ast.AST | None) -> list[str]:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return [s.strip() for s in expr.value.split(",") if s.strip()]
    if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        return [s for element in expr.elts for s in listed_strings(element)]
    return []


def turns_fsdp_on(call: ast.Call) -> bool:
    """`fsdp=` with a value that turns FSDP on: a non-empty string or list, or True."""
    value = keyword_argument(call, "fsdp")
    if isinstance(value, ast.Constant):
        return value.value is True or (isinstance(value.value, str) and bool(value.value.strip()))
    if isinstance(value, (ast.List, ast.Tuple)):
        return bool(value.elts)
    if isinstance(value, ast.Attribute) and dotted(value.value) in ("FSDPOption",):
        return True
    return False
