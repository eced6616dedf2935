"""Whether a guarding `if` can hold where a binding or a return is evaluated: `if norm ==
"bn":` with `norm` bound to "ln" cannot, nor `if isinstance(norm_layer, str):` with
`norm_layer` a class. A mixin of `ckptlint.model.evaluation.denotation.Denotation`: the tested values
come from its `_eval`.
"""

from __future__ import annotations

import operator

from ckptlint.model.form.summary import Expr
from ckptlint.model.form.values import ClassRef, Constant, Frame, FunctionRef, Instance, Lambda, ModuleRef, Sequence, single, truthiness

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
        if tag == "call" and test[1] == ("name", "isinstance") and len(test[2]) == 2 and not test[3]:
            types = _builtin_types(test[2][1])
            values = self._eval(test[2][0], frame) if types is not None else frozenset()
            if values:
                return single(_is_instance(value, types) for value in values)
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


_BUILTIN_TYPES = {"str": str, "int": int, "float": float, "bool": bool, "bytes": bytes}


def _builtin_types(expr: Expr) -> tuple[type, ...] | None:
    """`str`, `(str, int)`: the builtin scalar types an `isinstance` test names, else None."""
    if expr[0] == "name" and expr[1] in _BUILTIN_TYPES:
        return (_BUILTIN_TYPES[expr[1]],)
    if expr[0] == "seq" and expr[1]:
        parts = [_builtin_types(item) for item in expr[1]]
        return tuple(t for part in parts for t in part) if all(part is not None for part in parts) else None
    return None


def _is_instance(value, types: tuple[type, ...]) -> bool | None:
    """`isinstance(value, types)` for a scalar `types`: a constant's own type decides; a class,
    function, module or module instance is never a string or a number."""
    if isinstance(value, Constant):
        return isinstance(value.value, types)
    if isinstance(value, (ClassRef, FunctionRef, Instance, Lambda, ModuleRef)):
        return False
    return None
