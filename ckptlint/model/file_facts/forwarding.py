"""Project functions whose keyword arguments reach torch's `checkpoint` (read with `ast`, as
part of a file's facts, so that a file calling one is found without naming checkpoint):

    def ckpt_forward(fn, *args, **kwargs):              a helper: hands its `**kwargs` to
        return checkpoint(fn, *args, **kwargs)           checkpoint without `use_reentrant`

    def checkpoint(fn):                                 a decorator: returns such a helper
        @functools.wraps(fn)                             around the function it decorates
        def wrapper(*args, **kwargs):
            return torch.utils.checkpoint.checkpoint(fn, *args, **kwargs)
        return wrapper

    @checkpoint                                         decorated: calling it calls the
    def chunk_fwd(q, k, v, scale=None): ...              decorator's wrapper

Whether a call hands keywords to the reentrant implementation is decided at the call
(`ckptlint.analysis.forwarding_helpers`); here only what the definitions say. A helper that
names `use_reentrant` anywhere (`kwargs.setdefault("use_reentrant", False)`) chooses the
implementation itself and is none of these.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from ckptlint.model.syntax.ast_walk import own_nodes, statements, walk
from ckptlint.model.file_facts.facts import ForwardingFact, ForwardingKind
from ckptlint.model.library.combined import LIBRARY_PREFIXES
from ckptlint.model.library.torch import CHECKPOINT_WRAPPER
from ckptlint.model.syntax.call_syntax import definitions

TORCH_CHECKPOINT = "torch.utils.checkpoint.checkpoint"

Resolve = Callable[[ast.AST], "str | None"]


def forwarding_facts(tree: ast.Module, module: str, resolve: Resolve) -> tuple[ForwardingFact, ...]:
    """The file's helpers, decorators and decorated functions."""
    found: list[ForwardingFact] = []
    # Names the file binds by several imports (`checkpoint` from DeepSpeed or from torch)
    # are not known to be torch's; looked for once a helper is.
    found_ambiguous: list[frozenset[str]] = []

    def ambiguous() -> frozenset[str]:
        if not found_ambiguous:
            found_ambiguous.append(ambiguous_imports(tree))
        return found_ambiguous[0]

    _forwarding_in(tree.body, module, False, resolve, ambiguous, found)
    return tuple(found)


def _forwarding_in(body, prefix: str, in_class: bool, resolve: Resolve, ambiguous, found: list[ForwardingFact]) -> None:
    """`forwarding_facts` of a body's definitions. Only what other code can name:
    module-level functions and methods (a nested helper is the enclosing function's
    business, and a decorator's wrapper is the decorator's). A module-level function, not a
    closure calling itself: that would be a reference cycle keeping the tree alive."""
    for node in definitions(body):
        name = f"{prefix}.{node.name}"
        if isinstance(node, ast.ClassDef):
            _forwarding_in(node.body, name, True, resolve, ambiguous, found)
            continue
        wrapper = _wrapper_call(node, resolve) if not in_class else None
        if wrapper is not None:
            found.append(ForwardingFact(name, ForwardingKind.WRAPPER, node.lineno, (), wrapper.lineno))
        helper = _checkpoint_call(node, resolve, ambiguous)
        if helper is not None:
            found.append(ForwardingFact(name, ForwardingKind.HELPER, node.lineno, _accepted(node, in_class), helper.lineno))
        decorator = _decorator_of(node, resolve, ambiguous)
        if decorator is not None:
            wrapper, call = decorator
            found.append(ForwardingFact(name, ForwardingKind.DECORATOR, node.lineno, _accepted(wrapper, False), call.lineno))
        for via in _project_decorators(node, resolve):
            found.append(ForwardingFact(name, ForwardingKind.DECORATED, node.lineno, via=via))


def _checkpoint_call(
    function: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Resolve, ambiguous: Callable[[], frozenset[str]]
) -> ast.Call | None:
    """The `checkpoint(fn, *args, **kwargs)` call that splats the function's own `**kwargs`
    (and no other dict), without `use_reentrant` named anywhere in the function, or with
    `use_reentrant=True` written in that very call (the caller's keywords cannot change it:
    a second `use_reentrant` would be a TypeError)."""
    kwarg = function.args.kwarg
    if kwarg is None:
        return None
    found = None
    for node in own_nodes(function.body):
        if isinstance(node, ast.Constant) and node.value == "use_reentrant":
            return None
        if not isinstance(node, ast.Call):
            continue
        flag = next((k.value for k in node.keywords if k.arg == "use_reentrant"), None)
        if flag is not None and not (
            resolve(node.func) == TORCH_CHECKPOINT and isinstance(flag, ast.Constant) and flag.value is True
        ):
            return None
        if resolve(node.func) != TORCH_CHECKPOINT or _head(node.func) in ambiguous():
            continue
        splats = [k.value for k in node.keywords if k.arg is None]
        if len(splats) == 1 and isinstance(splats[0], ast.Name) and splats[0].id == kwarg.arg:
            found = node
    return found


def _wrapper_call(function: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Resolve) -> ast.Call | None:
    """The call of torch's `checkpoint_wrapper` that gets the function's first parameter,
    then nothing but its own `*args` and `**kwargs` (`def checkpoint_wrapper(module, *args,
    **kwargs): return ptd_checkpoint_wrapper(module, *args, **kwargs)`), in a function that
    names no `checkpoint_impl` itself."""
    arguments = function.args
    positional = [*arguments.posonlyargs, *arguments.args]
    if arguments.kwarg is None or not positional:
        return None
    found = None
    for node in own_nodes(function.body):
        if isinstance(node, ast.Constant) and node.value == "checkpoint_impl":
            return None
        if not isinstance(node, ast.Call) or resolve(node.func) not in CHECKPOINT_WRAPPER:
            continue
        first, *rest = node.args or [None]
        handed_on = all(
            isinstance(arg, ast.Starred) and isinstance(arg.value, ast.Name) and arguments.vararg is not None
            and arg.value.id == arguments.vararg.arg
            for arg in rest
        )
        if (
            isinstance(first, ast.Name) and first.id == positional[0].arg and handed_on
            and len(node.keywords) == 1 and node.keywords[0].arg is None
            and isinstance(node.keywords[0].value, ast.Name) and node.keywords[0].value.id == arguments.kwarg.arg
        ):
            found = node
    return found


def _decorator_of(
    function: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Resolve, ambiguous: Callable[[], frozenset[str]]
) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, ast.Call] | None:
    """`def checkpoint(fn)` returning a nested helper that checkpoints `fn`: the helper and
    its checkpoint call."""
    parameters = {a.arg for a in (*function.args.posonlyargs, *function.args.args)}
    returned = {s.value.id for s in statements(function.body) if isinstance(s, ast.Return) and isinstance(s.value, ast.Name)}
    for inner in definitions(function.body):
        if not isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)) or inner.name not in returned:
            continue
        call = _checkpoint_call(inner, resolve, ambiguous)
        if call is not None and call.args and isinstance(call.args[0], ast.Name) and call.args[0].id in parameters:
            return inner, call
    return None


def _project_decorators(function: ast.FunctionDef | ast.AsyncFunctionDef, resolve: Resolve) -> Iterator[str]:
    """The decorators written as a name (not a call) that resolve to no library's."""
    for decorator in function.decorator_list:
        if isinstance(decorator, (ast.Name, ast.Attribute)):
            resolved = resolve(decorator)
            if resolved is not None and not resolved.startswith(LIBRARY_PREFIXES):
                yield resolved


def _accepted(function: ast.FunctionDef | ast.AsyncFunctionDef, is_method: bool) -> tuple[str, ...]:
    """The keywords the function binds to its own parameters (they never reach checkpoint)."""
    names = [a.arg for a in (*function.args.args, *function.args.kwonlyargs)]
    if is_method and names and function.args.args and not any(
        isinstance(d, ast.Name) and d.id == "staticmethod" for d in function.decorator_list
    ):
        names = names[1:]
    return tuple(names)


def _head(expr: ast.AST) -> str | None:
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return expr.id if isinstance(expr, ast.Name) else None


def ambiguous_imports(tree: ast.Module) -> frozenset[str]:
    """Names the module binds by several imports of different things (`checkpoint` from
    DeepSpeed in one branch, from torch in another)."""
    bound: dict[str, set[str]] = {}
    for node in walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                bound.setdefault(alias.asname or alias.name, set()).add(f"{'.' * node.level}{node.module or ''}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                # `import torch` and `import torch.utils.checkpoint` both bind `torch` itself.
                bound.setdefault(alias.asname or alias.name.split(".")[0], set()).add(
                    alias.name if alias.asname else alias.name.split(".")[0]
                )
    return frozenset(name for name, targets in bound.items() if len(targets) > 1)
