"""The `if` guards a checkpoint call of CKPT005 sits behind that read a checkpointing flag
(`if self.with_cp and x.requires_grad:`), and whether a guard is known to be off in the
module that runs the call."""

from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.cst_walk import descendants
from ckptlint.model.form.values import falsy

# Flags that switch a block's own checkpointing on (`if self.gradient_checkpointing:`,
# `if self.use_checkpoint:`): such a block checkpoints only when asked to.
FLAG_WORDS = ("checkpoint", "ckpt")


def reads_flag(test: cst.BaseExpression) -> bool:
    return any(
        isinstance(node, cst.Name) and any(word in node.value.lower() for word in FLAG_WORDS)
        for node in descendants(test)
    )


def conjuncts(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The parts of an `and` chain (the test itself otherwise)."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return [*conjuncts(test.left), *conjuncts(test.right)]
    return [test]


def guard_off(denotation, call, instance) -> bool:
    """An `if self.<flag>:` guard of the inner checkpoint known to be off in `instance` (a
    block built with `with_cp=False`): it does not checkpoint."""
    for flag in call.flags:
        values = denotation.attribute(instance, flag) if instance is not None else frozenset()
        if values and all(falsy(v) for v in values):
            return True
    return False
