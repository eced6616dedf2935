"""What can run in training, read with `ast`: the branches a training forward never takes
(`if not self.training:`, a flag the class only ever sets to False, a KV cache behind
`use_cache`, an attribute only code outside the class attaches), and the statements of a
body. The ground `ckptlint.model.file_facts.method_behaviour` stands on."""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator, Sequence

from ckptlint.model.syntax.ast_walk import statements, walk


def self_attribute(expr: ast.AST) -> str | None:
    """`self.x`, `self.x[i]`, `self.x.y`: the `self` attribute written through."""
    while isinstance(expr, (ast.Subscript, ast.Attribute)):
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == "self":
            return expr.attr
        expr = expr.value
    return None


def is_use_cache(expr: ast.AST) -> bool:
    return (isinstance(expr, ast.Name) and expr.id == "use_cache") or (
        isinstance(expr, ast.Attribute) and expr.attr == "use_cache"
    )


def flags_never_set(node: ast.ClassDef) -> frozenset[str]:
    """`self.<flag>` attributes the class only ever sets to False / None / 0 (a
    visualisation switch like `self.save_attention = False`): code under `if self.<flag>:`
    does not run unless something outside the class flips it."""
    values: dict[str, list[ast.AST]] = {}
    for method in node.body:
        if not isinstance(method, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for inner in statements(method.body):
            if isinstance(inner, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and getattr(inner, "value", None) is not None:
                targets = inner.targets if isinstance(inner, ast.Assign) else [inner.target]
                for target in targets:
                    attribute = self_attribute(target)
                    if attribute is not None and isinstance(target, ast.Attribute):
                        values.setdefault(attribute, []).append(inner.value if not isinstance(inner, ast.AugAssign) else target)
    return frozenset(
        name for name, assigned in values.items()
        if all(isinstance(v, ast.Constant) and not v.value for v in assigned)
    )


def attached_from_outside(node: ast.ClassDef) -> frozenset[str]:
    """Attributes a method of a plain `nn.Module` tests with `hasattr(self, "<name>")` and
    nothing in the class sets (no `self.<name> = ...`, no other string naming it: `setattr`,
    `register_buffer`): lingua's `if hasattr(self, "kv_cache"):` in attention, attached to
    the module by its generation code only. Code under the test does not run in training
    unless something outside the class attaches it."""
    if not all(ast.unparse(base) in ("nn.Module", "torch.nn.Module", "Module") for base in node.bases):
        return frozenset()  # a base may set it
    tests: Counter[str] = Counter()
    strings: Counter[str] = Counter()
    stored: set[str] = set()
    for inner in walk(node):
        name = _self_hasattr(inner)
        if name is not None:
            tests[name] += 1
        elif isinstance(inner, ast.Constant) and isinstance(inner.value, str):
            strings[inner.value] += 1
        elif isinstance(inner, ast.Attribute) and isinstance(inner.ctx, (ast.Store, ast.Del)) and self_attribute(inner) == inner.attr:
            stored.add(inner.attr)
    # A test's own string is one of `strings`: none other may name the attribute.
    return frozenset(name for name in tests if name not in stored and strings[name] == tests[name])


def _self_hasattr(node: ast.AST) -> str | None:
    """`name` for `hasattr(self, "name")`."""
    if (
        isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "hasattr"
        and len(node.args) == 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == "self"
        and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
    ):
        return node.args[1].value
    return None


def rules_out_training(test: ast.AST, never_true: frozenset[str] = frozenset()) -> bool | None:
    """True if an `if` test can only hold outside training (`not self.training`,
    `torch.jit.is_scripting()`), False if only in training (`self.training`), else None.

    A KV-cache guard (`if use_cache:`, `if self.use_cache and ...`, `if self.config.use_cache:`)
    counts as outside training too: under checkpointing in training transformers turns
    `use_cache` off (per architecture before 5.0, in `GradientCheckpointingLayer` from 5.0;
    CKPT020 reports the loops where it stays on), and a training forward has no use for a cache."""
    if is_use_cache(test) or (
        isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) and any(is_use_cache(v) for v in test.values)
    ):
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and (
        is_use_cache(test.operand) or _self_hasattr(test.operand) in never_true
    ):
        return False
    if isinstance(test, ast.BoolOp):
        parts = [rules_out_training(value, never_true) for value in test.values]
        if isinstance(test.op, ast.Or) and False in parts:
            return False  # `torch.jit.is_tracing() or self.training`: true whenever training
        if isinstance(test.op, ast.And) and True in parts:
            return True  # `x and not self.training`: true only outside training
        return None
    if (self_attribute(test) in never_true and isinstance(test, ast.Attribute)) or _self_hasattr(test) in never_true:
        return True  # never true at all
    text = ast.unparse(test)
    if text in ("not self.training", "self.training is False", "self.training == False"):
        return True
    if text in ("torch.jit.is_scripting()", "torch.jit.is_tracing()"):
        return True
    if text == "self.training":
        return False
    return None


def in_training(body: Sequence[ast.stmt], never_true: frozenset[str] = frozenset()) -> Iterator[ast.stmt]:
    """The simple statements of a body that can run in training: branches whose test rules
    training out (`if not self.training:`, `if use_cache:`, `if self.<flag never set>:`)
    are skipped, and so is what follows an `if` that returns whenever training."""
    # Recursive as a module-level function: a closure calling itself is a reference cycle,
    # which keeps the syntax tree alive until the collector runs.
    for statement in body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(statement, ast.If):
            outside_training = rules_out_training(statement.test, never_true)
            if outside_training is not True:
                yield from in_training(statement.body, never_true)
            if outside_training is not False:
                yield from in_training(statement.orelse, never_true)
            if outside_training is False and statement.body and isinstance(statement.body[-1], (ast.Return, ast.Raise)):
                return  # `if not use_cache: return out`: what follows cannot run in training
        elif isinstance(statement, (ast.For, ast.AsyncFor, ast.While)):
            yield from in_training(statement.body, never_true)
            yield from in_training(statement.orelse, never_true)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            yield from in_training(statement.body, never_true)
        elif isinstance(statement, ast.Try):
            yield from in_training(statement.body, never_true)
            for handler in statement.handlers:
                yield from in_training(handler.body, never_true)
            yield from in_training(statement.orelse, never_true)
            yield from in_training(statement.finalbody, never_true)
        else:
            yield statement
