"""A `train()` override that puts every BatchNorm below the module in eval mode: mmcv /
mmdet / mmseg backbones' `norm_eval`, detectron-style frozen statistics.

    def train(self, mode=True):
        super().train(mode)
        if mode and self.norm_eval:
            for m in self.modules():
                if isinstance(m, _BatchNorm):
                    m.eval()

A BatchNorm in eval mode normalises with its running statistics and updates none, so a
checkpointed region below such a module does not update them twice (CKPT010). Read with
`ast` by `ckptlint.model.extraction`; the flags are evaluated by the project model.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence

from ckptlint.model.method_behaviour import guard_flags

# What `isinstance(m, X)` must test for the loop to reach every BatchNorm (`_BatchNorm` is
# the base of torch's BatchNorm1d/2d/3d and SyncBatchNorm; `_NormBase` of those and of
# InstanceNorm).
_BATCHNORM_BASES = frozenset({"_BatchNorm", "_NormBase", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"})
_MODULE_WALKS = frozenset({"modules", "named_modules"})
UNKNOWN_FLAG = "?"  # a guard other than `self.<flag>` / `mode`
_TRAINING = frozenset({"mode"})  # `train(mode)`'s argument: true in training


def batchnorm_frozen_under(node: ast.ClassDef, resolve: Callable[[ast.AST], str | None]) -> tuple[str, ...] | None:
    """The `self.<flag>` attributes under which the class's `train()` puts every BatchNorm
    below it in eval mode (`()`: always; `UNKNOWN_FLAG` for a guard not read here); None
    when it does not."""
    for method in node.body:
        if isinstance(method, ast.FunctionDef) and method.name == "train":
            found = _frozen_in(method.body, resolve, ())
            if found is not None:
                return found
    return None


def _frozen_in(body: Sequence[ast.stmt], resolve, flags: tuple[str, ...]) -> tuple[str, ...] | None:
    for statement in body:
        if isinstance(statement, ast.If):
            found = _frozen_in(statement.body, resolve, flags + guard_flags(statement.test, UNKNOWN_FLAG, _TRAINING))
            if found is not None:
                return found
        elif isinstance(statement, ast.For) and _walks_own_modules(statement.iter):
            target = statement.target
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[-1]
            if isinstance(target, ast.Name) and _evaluates_batchnorm(statement.body, target.id, resolve):
                return flags
    return None


def frozen_parameter(body: Sequence[ast.stmt], parameters: Sequence[str], resolve) -> str | None:
    """The parameter whose BatchNorms a function puts in eval mode, detectron / mmdet's
    `freeze_bn(model)` helper:

        def freeze_bn(model):
            for m in model.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.eval()

    (at the top of its body); None when it does not."""
    for statement in body:
        if isinstance(statement, ast.For):
            target = statement.target
            if isinstance(target, ast.Tuple) and target.elts:
                target = target.elts[-1]
            walked = next((p for p in parameters if _walks_own_modules(statement.iter, p)), None)
            if walked is not None and isinstance(target, ast.Name) and _evaluates_batchnorm(statement.body, target.id, resolve):
                return walked
    return None


def _walks_own_modules(iterable: ast.AST, receiver: str = "self") -> bool:
    """`self.modules()`, `self.named_modules()` (or of `receiver`)."""
    return (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Attribute)
        and iterable.func.attr in _MODULE_WALKS
        and isinstance(iterable.func.value, ast.Name)
        and iterable.func.value.id == receiver
    )


def _evaluates_batchnorm(body: Sequence[ast.stmt], variable: str, resolve) -> bool:
    """`if isinstance(m, _BatchNorm): m.eval()` (or `.train(False)`) in a loop's body."""
    for statement in body:
        if not (isinstance(statement, ast.If) and _tests_batchnorm(statement.test, variable, resolve)):
            continue
        for inner in statement.body:
            call = inner.value if isinstance(inner, ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == variable
                and (call.func.attr == "eval" or (
                    call.func.attr == "train" and call.args and isinstance(call.args[0], ast.Constant)
                    and call.args[0].value is False
                ))
            ):
                return True
    return False


def _tests_batchnorm(test: ast.AST, variable: str, resolve) -> bool:
    if not (
        isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
        and len(test.args) == 2 and isinstance(test.args[0], ast.Name) and test.args[0].id == variable
    ):
        return False
    classes = test.args[1].elts if isinstance(test.args[1], ast.Tuple) else [test.args[1]]
    return any((resolve(c) or ast.unparse(c)).rsplit(".", 1)[-1] in _BATCHNORM_BASES for c in classes)
