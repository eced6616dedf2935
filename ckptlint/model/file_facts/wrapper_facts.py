"""How `checkpoint_wrapper` / `apply_activation_checkpointing` calls are configured, read
from CPython's tree during extraction: the implementation a call or a partial selects
(`checkpoint_impl=`, `checkpoint_wrapper_fn=`), and the classes a `check_fn` or an
auto-wrap policy names. A mixin of `ckptlint.model.file_facts.extraction._Extractor`, which provides
`resolve`, `assigned_calls` and `predicates`."""

from __future__ import annotations

import ast

from ckptlint.model.syntax.ast_walk import walk
from ckptlint.model.file_facts.facts import Impl
from ckptlint.model.library.torch import CHECKPOINT_IMPL_NO_REENTRANT, CHECKPOINT_IMPL_REENTRANT, CHECKPOINT_WRAPPER
from ckptlint.model.syntax.call_syntax import keyword_argument


class WrapperFacts:
    def _impl_of(self, call: ast.Call, enclosing_class: str | None) -> Impl:
        """`checkpoint_wrapper(m, checkpoint_impl=...)`: non-reentrant by default."""
        value = keyword_argument(call, "checkpoint_impl")
        if value is None and len(call.args) >= 2:
            value = call.args[1]
        if value is None:
            return Impl.NON_REENTRANT
        resolved = self.resolve(value, enclosing_class)
        if resolved == CHECKPOINT_IMPL_REENTRANT:
            return Impl.REENTRANT
        if resolved == CHECKPOINT_IMPL_NO_REENTRANT:
            return Impl.NON_REENTRANT
        return Impl.UNKNOWN

    def _wrapper_impl(self, wrapper_fn: ast.AST | None, enclosing_class: str | None) -> Impl:
        """`checkpoint_wrapper_fn=`: torch's `checkpoint_wrapper` by default, or a partial of it."""
        if wrapper_fn is None:
            return Impl.NON_REENTRANT
        resolved = self.resolve(wrapper_fn, enclosing_class)
        if resolved in CHECKPOINT_WRAPPER:
            return Impl.NON_REENTRANT
        partial = wrapper_fn if isinstance(wrapper_fn, ast.Call) else self._assigned_call(wrapper_fn)
        if (
            isinstance(partial, ast.Call)
            and self.resolve(partial.func, enclosing_class) == "functools.partial"
            and partial.args
            and self.resolve(partial.args[0], enclosing_class) in CHECKPOINT_WRAPPER
        ):
            if any(k.arg is None for k in partial.keywords):
                return Impl.UNKNOWN
            inner = ast.Call(func=partial.args[0], args=[ast.Constant(None), *partial.args[1:]], keywords=partial.keywords)
            return self._impl_of(inner, enclosing_class)
        return Impl.UNKNOWN

    def _assigned_call(self, expr: ast.AST) -> ast.Call | None:
        return self.assigned_calls.get(expr.id) if isinstance(expr, ast.Name) else None

    def _check_fn_classes(self, call: ast.Call, enclosing_class: str | None) -> list[str]:
        found: list[str] = []
        check_fn = keyword_argument(call, "check_fn")
        if isinstance(check_fn, ast.Name):
            check_fn = self.predicates.get(check_fn.id)
        if check_fn is not None:
            for node in walk(check_fn):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == "isinstance"
                    and len(node.args) == 2
                ):
                    found.extend(self._classes_in(node.args[1], enclosing_class))
        policy = keyword_argument(call, "auto_wrap_policy")
        if policy is not None:
            for node in walk(policy):
                if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
                    found.extend(self._classes_in(node, enclosing_class))
        return found

    def _classes_in(self, expr: ast.AST | None, enclosing_class: str | None) -> list[str]:
        if expr is None:
            return []
        if isinstance(expr, (ast.Set, ast.List, ast.Tuple)):
            return [name for element in expr.elts for name in self._classes_in(element, enclosing_class)]
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return [expr.value]
        resolved = self.resolve(expr, enclosing_class)
        return [resolved] if resolved is not None else []
