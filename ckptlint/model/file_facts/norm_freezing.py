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
`ast` by `ckptlint.model.file_facts.extraction`; the flags are evaluated by the project model.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Sequence

from ckptlint.model.syntax.ast_walk import walk
from ckptlint.model.file_facts.method_behaviour import guard_flags

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


def frozen_when_applied(body: Sequence[ast.stmt], parameters: Sequence[str], resolve) -> str | None:
    """The parameter a function puts in eval mode when it is a BatchNorm: a function for
    `Module.apply`, which calls it on every module below (detectron / faster-rcnn's
    `model.apply(set_bn_eval)`):

        def set_bn_eval(m):
            if isinstance(m, nn.modules.batchnorm._BatchNorm):   # or: if "BatchNorm" in
                m.eval()                                         # type(m).__name__

    (at the top of its body, on its first parameter); None when it does not."""
    if not parameters:
        return None
    module = parameters[0]
    return module if _evaluates_batchnorm(body, module, resolve, _class_names_of(body, module)) else None


# What a converter puts in a BatchNorm's place: a frozen copy (torchvision's, detectron2's,
# timm's `FrozenBatchNorm2d`, `FrozenBatchNormAct2d`: buffers only, fixed statistics).
_FROZEN_NORM = re.compile(r"^Frozen\w*Norm")
_CHILD_WALKS = frozenset({"children", "named_children"})


def converted_parameter(
    body: Sequence[ast.stmt], parameters: Sequence[str], resolve, owner: str | None = None
) -> str | None:
    """The parameter whose BatchNorms a function replaces by frozen copies, detectron2's
    `FrozenBatchNorm2d.convert_frozen_batchnorm(module)` (copied into many projects) and
    timm's `freeze_batch_norm_2d`:

        res = module
        if isinstance(module, nn.BatchNorm2d):
            res = FrozenBatchNorm2d(module.num_features)      # or `cls(...)` in FrozenBatchNorm2d
        else:
            for name, child in module.named_children():
                new_child = convert_frozen_batchnorm(child)
                if new_child is not child:
                    res.add_module(name, new_child)
        return res

    `owner`: the simple name of the class a classmethod belongs to (what `cls` builds). Not
    `SyncBatchNorm.convert_sync_batchnorm`, whose replacement updates statistics; None when
    it does not convert."""
    if not parameters:
        return None
    module = parameters[0]
    local = {
        target.id: statement.value for statement in body if isinstance(statement, ast.Assign)
        for target in statement.targets if isinstance(target, ast.Name)
    }

    def substituted(expr: ast.AST) -> ast.AST:
        return local.get(expr.id, expr) if isinstance(expr, ast.Name) else expr

    def frozen_replacement(statement: ast.stmt) -> bool:
        value = statement.value if isinstance(statement, (ast.Assign, ast.Return)) else None
        if not isinstance(value, ast.Call):
            return False
        if isinstance(value.func, ast.Name) and value.func.id == "cls":
            return owner is not None and _FROZEN_NORM.match(owner) is not None
        name = resolve(value.func) or ast.unparse(value.func)
        return _FROZEN_NORM.match(name.rsplit(".", 1)[-1]) is not None

    replaces = walks_children = False
    for node in walk(ast.Module(body=list(body), type_ignores=[])):
        if isinstance(node, ast.If):
            test = node.test
            if (
                isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance"
                and len(test.args) == 2
            ):
                test = ast.Call(test.func, [test.args[0], substituted(test.args[1])], [])
            if _tests_batchnorm(test, module, resolve) and any(frozen_replacement(s) for s in node.body):
                replaces = True
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            walks_children = walks_children or (
                isinstance(node.iter, ast.Call) and isinstance(node.iter.func, ast.Attribute)
                and node.iter.func.attr in _CHILD_WALKS and isinstance(node.iter.func.value, ast.Name)
                and node.iter.func.value.id == module
            )
    return module if replaces and walks_children else None


def _walks_own_modules(iterable: ast.AST, receiver: str = "self") -> bool:
    """`self.modules()`, `self.named_modules()` (or of `receiver`)."""
    return (
        isinstance(iterable, ast.Call)
        and isinstance(iterable.func, ast.Attribute)
        and iterable.func.attr in _MODULE_WALKS
        and isinstance(iterable.func.value, ast.Name)
        and iterable.func.value.id == receiver
    )


def _evaluates_batchnorm(body: Sequence[ast.stmt], variable: str, resolve, class_names: frozenset[str] = frozenset()) -> bool:
    """`if isinstance(m, _BatchNorm): m.eval()` (or `.train(False)`) in a loop's body; with
    `class_names` (names bound to the class name of `variable`), also a test of that name
    for "BatchNorm" (`if classname.find("BatchNorm") != -1: m.eval()`)."""
    for statement in body:
        if not (isinstance(statement, ast.If) and (
            _tests_batchnorm(statement.test, variable, resolve) or _tests_batchnorm_name(statement.test, variable, class_names)
        )):
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


def _class_name_of(expr: ast.AST, variable: str) -> bool:
    """`m.__class__.__name__`, `type(m).__name__`."""
    if not (isinstance(expr, ast.Attribute) and expr.attr == "__name__"):
        return False
    owner = expr.value
    if isinstance(owner, ast.Attribute) and owner.attr == "__class__":
        return isinstance(owner.value, ast.Name) and owner.value.id == variable
    return (
        isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "type"
        and len(owner.args) == 1 and isinstance(owner.args[0], ast.Name) and owner.args[0].id == variable
    )


def _class_names_of(body: Sequence[ast.stmt], variable: str) -> frozenset[str]:
    """The names the body binds to `variable`'s class name (`classname = m.__class__.__name__`)."""
    return frozenset(
        target.id for statement in body if isinstance(statement, ast.Assign) and _class_name_of(statement.value, variable)
        for target in statement.targets if isinstance(target, ast.Name)
    )


def _tests_batchnorm_name(test: ast.AST, variable: str, class_names: frozenset[str]) -> bool:
    """A test of the class name for "BatchNorm": `"BatchNorm" in classname`,
    `classname.find("BatchNorm") != -1`, `type(m).__name__.startswith("BatchNorm")`."""

    def names_the_class(expr: ast.AST) -> bool:
        return (isinstance(expr, ast.Name) and expr.id in class_names) or _class_name_of(expr, variable)

    def is_batchnorm(expr: ast.AST) -> bool:
        return isinstance(expr, ast.Constant) and isinstance(expr.value, str) and "BatchNorm" in expr.value

    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        left, right = test.left, test.comparators[0]
        if isinstance(test.ops[0], ast.In):
            return is_batchnorm(left) and names_the_class(right)
        if isinstance(test.ops[0], ast.NotEq) and isinstance(left, ast.Call):  # `classname.find("BatchNorm") != -1`
            return (
                isinstance(left.func, ast.Attribute) and left.func.attr == "find" and names_the_class(left.func.value)
                and len(left.args) == 1 and is_batchnorm(left.args[0])
                and isinstance(right, ast.UnaryOp) and isinstance(right.op, ast.USub)
                and isinstance(right.operand, ast.Constant) and right.operand.value == 1
            )
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Attribute) and test.func.attr in ("startswith", "endswith"):
        return names_the_class(test.func.value) and len(test.args) == 1 and is_batchnorm(test.args[0])
    return False
