"""Whether a guarding `if` can hold where a binding or a return is evaluated: `if norm ==
"bn":` with `norm` bound to "ln" cannot. A mixin of `ckptlint.model.denotation.Denotation`:
the tested values come from its `_eval`.
"""

from __future__ import annotations

import operator

from ckptlint.model.summary import Expr
from ckptlint.model.values import Constant, Frame, Sequence, single, truthiness

_ORDERINGS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}


class ConditionSemantics:
    def _may_hold(self, conditions: tuple, frame: Frame) -> bool:
        """False when a guarding `if` test is known to have the other truth here
        (`if norm == "bn":` with `norm` bound to "ln")."""
        for test, wanted in conditions:
            truth = self._truth(test, frame)
            if truth is not None and truth is not wanted:
                return False
        return True

    def _truth(self, test: Expr, frame: Frame) -> bool | None:
        tag = test[0]
        if tag == "not":
            inner = self._truth(test[1], frame)
            return None if inner is None else not inner
        if tag in ("and", "any"):
            parts = [self._truth(part, frame) for part in test[1]]
            decisive = tag == "any"  # `or` is decided by a true part, `and` by a false one
            if decisive in parts:
                return decisive
            return (not decisive) if all(part is (not decisive) for part in parts) else None
        if tag == "cmp":
            return self._compare(test[1], self._eval(test[2], frame), self._eval(test[3], frame))
        return single(truthiness(value) for value in self._eval(test, frame))

    def _compare(self, operator: str, left: frozenset, right: frozenset) -> bool | None:
        if not left or not right:
            return None
        if operator in ("in", "not in"):
            members = set()
            for container in right:
                if not isinstance(container, Sequence) or container.items is None:
                    return None
                members |= container.elements
            if not all(isinstance(v, Constant) for v in members | left):
                return None
            found = single(v in members for v in left)
            return found if found is None or operator == "in" else not found
        if operator in ("is", "is not") and right == {Constant(None)}:
            is_none = single(v == Constant(None) for v in left)
            return is_none if is_none is None or operator == "is" else not is_none
        if operator in _ORDERINGS:
            # `drop_path_rate > 0.0`: numbers only (True/False and strings are not ordered here)
            if not all(isinstance(v, Constant) and type(v.value) in (int, float) for v in left | right):
                return None
            return single(_ORDERINGS[operator](a.value, b.value) for a in left for b in right)
        if all(isinstance(v, Constant) for v in left | right):
            equal = single(a.value == b.value for a in left for b in right)
            return equal if equal is None or operator in ("==", "is") else not equal
        return None
