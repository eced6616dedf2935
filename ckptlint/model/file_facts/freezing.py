"""What code outside a module's class does to the `requires_grad` of the module's parameters:
a training script that freezes the embedding of the model it builds, a wrapper's constructor
that freezes part of the model it holds. Read with `ast` by
`ckptlint.model.file_facts.extraction`, one event per statement (`Event.target` is the module
as written, `model.embed`):

    model.embed.requires_grad_(False)                           FREEZES_PARAMETERS
    for p in model.embed.parameters(): p.requires_grad = False   (also `p.requires_grad_(False)`,
                                                                `named_parameters()`)
    model.embed.weight.requires_grad = False                    `api` WEIGHT: its weight only
    model.head.requires_grad_(True)                             UNFREEZES_PARAMETERS (also
                                                                `requires_grad_()`, `= True`, a
                                                                value not known to be False)

A freezing statement under an `if` or inside another loop (`source` CONDITIONAL), or a loop
that sets `requires_grad = False` only for some names (`if "embed" in n:`), freezes only
sometimes: the first is recorded as such, the second not at all; any statement that may make
parameters trainable again is recorded (CKPT007 takes a module as frozen only when nothing
unfreezes it). The project model resolves which module each target is
(`ckptlint.model.project.freezing_queries`).

Only module-level code, functions outside classes and constructors freeze (what a method
freezes depends on when it is called); `self` alone and `self.<attribute>` are the class's
own freezing, which the rule reads in the class itself. Unfreezing counts wherever it is.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Sequence

from ckptlint.model.file_facts.facts import Event, EventKind
from ckptlint.model.syntax.call_syntax import dotted

WEIGHT = "weight"  # `api` of a freezing of the module's `weight` alone
CONDITIONAL = "conditional"  # `source` of a freezing that does not always run
_PARAMETER_ITERATORS = frozenset({"parameters", "named_parameters"})


def parameter_freezing(body: Sequence[ast.stmt], *, freezes: bool, in_method: bool) -> list[Event]:
    """The freezing events of a function body (`freezes`: whether its freezing counts, a
    constructor's or code outside classes; `in_method`: `self` names the class's instance)."""
    return [
        event for event in _statements(body, unconditional=True)
        if (freezes or event.kind is EventKind.UNFREEZES_PARAMETERS) and not (
            in_method and event.kind is EventKind.FREEZES_PARAMETERS and event.target.count(".") < 2
            and event.target.split(".")[0] == "self"
        )
    ]


def _statements(body: Sequence[ast.stmt], *, unconditional: bool) -> Iterator[Event]:
    for statement in body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
            event = _requires_grad_call(statement.value, unconditional)
            if event is not None:
                yield event
        elif isinstance(statement, ast.Assign):
            for target in statement.targets:
                event = _requires_grad_assignment(target, statement.value, statement, unconditional)
                if event is not None:
                    yield event
        elif isinstance(statement, (ast.For, ast.AsyncFor)):
            receiver = _parameters_of(statement.iter)
            if receiver is not None and (parameter := _loop_parameter(statement.target)) is not None:
                yield from _parameters_loop(statement, receiver, parameter, unconditional)
            else:
                yield from _statements(statement.body, unconditional=False)
                yield from _statements(statement.orelse, unconditional=False)
        elif isinstance(statement, (ast.If, ast.While)):
            yield from _statements(statement.body, unconditional=False)
            yield from _statements(statement.orelse, unconditional=False)
        elif isinstance(statement, (ast.With, ast.AsyncWith)):
            yield from _statements(statement.body, unconditional=unconditional)
        elif isinstance(statement, ast.Try) or type(statement).__name__ == "TryStar":
            yield from _statements(statement.body, unconditional=unconditional)
            for handler in statement.handlers:
                yield from _statements(handler.body, unconditional=False)
            yield from _statements(statement.orelse, unconditional=unconditional)
            yield from _statements(statement.finalbody, unconditional=unconditional)
        elif isinstance(statement, ast.Match):
            for case in statement.cases:
                yield from _statements(case.body, unconditional=False)


def _event(frozen: bool | None, receiver: str, node: ast.AST, unconditional: bool, weight: bool = False) -> Event:
    """`frozen`: False sets `requires_grad` True, None to a value not known (it may unfreeze)."""
    if not frozen:
        return Event(EventKind.UNFREEZES_PARAMETERS, receiver, node.lineno, node.col_offset)
    return Event(
        EventKind.FREEZES_PARAMETERS, receiver, node.lineno, node.col_offset,
        api=WEIGHT if weight else "", source="" if unconditional else CONDITIONAL,
    )


def _requires_grad_call(call: ast.Call, unconditional: bool) -> Event | None:
    """`X.requires_grad_(flag)` (`X.weight.requires_grad_(flag)`: X's weight)."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and func.attr == "requires_grad_"):
        return None
    receiver, part = _module_of(func.value)
    frozen = _freezes(call.args[0] if call.args else None, call)
    if receiver is None or (part == "bias" and frozen):
        return None  # a bias alone frozen leaves the module training
    return _event(frozen, receiver, call, unconditional, weight=part == "weight")


def _requires_grad_assignment(target: ast.AST, value: ast.AST, node: ast.stmt, unconditional: bool) -> Event | None:
    """`X.weight.requires_grad = flag` (a module's own `requires_grad` is no torch attribute)."""
    if not (isinstance(target, ast.Attribute) and target.attr == "requires_grad"):
        return None
    owner = target.value
    if not (isinstance(owner, ast.Attribute) and owner.attr in ("weight", "bias")):
        return None
    receiver, frozen = dotted(owner.value), _freezes(value, None)
    if receiver is None or (owner.attr == "bias" and frozen):
        return None
    return _event(frozen, receiver, node, unconditional, weight=owner.attr == "weight")


def _freezes(value: ast.AST | None, call: ast.Call | None) -> bool | None:
    """True for a literal False (`requires_grad_(False)`), False for True or no argument,
    None otherwise; keyword `requires_grad=` too."""
    if call is not None and value is None:
        value = next((k.value for k in call.keywords if k.arg == "requires_grad"), None)
        if value is None:
            return False if not call.keywords else None
    if isinstance(value, ast.Constant) and isinstance(value.value, bool):
        return not value.value
    return None


def _module_of(expr: ast.AST) -> tuple[str | None, str]:
    """The module a `requires_grad_` receiver names, and the parameter named ("weight",
    "bias"; "" for the module)."""
    if isinstance(expr, ast.Attribute) and expr.attr in ("weight", "bias"):
        return dotted(expr.value), expr.attr
    return dotted(expr), ""


def _parameters_of(iterable: ast.AST) -> str | None:
    """`X.parameters()` / `X.named_parameters()` (also wrapped in `list(...)`): X."""
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Name) and iterable.func.id == "list" and iterable.args:
        iterable = iterable.args[0]
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) and iterable.func.attr in _PARAMETER_ITERATORS:
        return dotted(iterable.func.value)
    return None


def _loop_parameter(target: ast.AST) -> str | None:
    """`p` of `for p in ...` / `for name, p in ...`."""
    if isinstance(target, ast.Tuple) and len(target.elts) == 2:
        target = target.elts[1]
    return target.id if isinstance(target, ast.Name) else None


def _parameters_loop(loop: ast.For | ast.AsyncFor, receiver: str, parameter: str, unconditional: bool) -> Iterator[Event]:
    """A loop over X's parameters: frozen when its body always sets `p.requires_grad = False`
    (at its top level), made trainable when anything in it may set it otherwise."""
    always = sometimes_trainable = False
    for node, at_top in _loop_body(loop.body, top=True):
        flag = _parameter_flag(node, parameter)
        if flag is None:
            continue
        frozen, _ = flag
        if frozen is True and at_top:
            always = True
        elif frozen is not True:
            sometimes_trainable = True
    if sometimes_trainable:
        yield _event(False, receiver, loop, unconditional)
    elif always:
        yield _event(True, receiver, loop, unconditional)


def _loop_body(body: Sequence[ast.stmt], *, top: bool) -> Iterator[tuple[ast.stmt, bool]]:
    for statement in body:
        yield statement, top
        for field in ("body", "orelse", "finalbody"):
            nested = getattr(statement, field, None)
            if isinstance(nested, list) and not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from _loop_body(nested, top=top and isinstance(statement, (ast.With, ast.AsyncWith)))


def _parameter_flag(statement: ast.stmt, parameter: str) -> tuple[bool | None, ast.AST] | None:
    """What a statement sets the loop's parameter's `requires_grad` to: (freezes, node)."""
    if isinstance(statement, ast.Assign):
        for target in statement.targets:
            if (
                isinstance(target, ast.Attribute) and target.attr == "requires_grad"
                and isinstance(target.value, ast.Name) and target.value.id == parameter
            ):
                return _freezes(statement.value, None), statement
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
        call = statement.value
        func = call.func
        if (
            isinstance(func, ast.Attribute) and func.attr == "requires_grad_"
            and isinstance(func.value, ast.Name) and func.value.id == parameter
        ):
            return _freezes(call.args[0] if call.args else None, call), call
    return None
