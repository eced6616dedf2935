"""What the FSDP rules ask of a file being linted, and of its project.

The project index (`ckptlint.model.index`) knows where FSDP is used and what functions do to the
models passed to them; this module answers, for the file's libcst tree, which names are
torch's FSDP and activation-checkpointing APIs, and whether the project counts as an FSDP
project (detected, or forced by the `fsdp` setting).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.model.file_facts.facts import Event, EventKind, FsdpKind, FsdpUse, FunctionFacts, Impl, ParameterEffect
from ckptlint.model.index import ProjectIndex
from ckptlint.model.library.torch import (
    APPLY_ACTIVATION_CHECKPOINTING, CHECKPOINT_IMPL_NO_REENTRANT, CHECKPOINT_IMPL_REENTRANT, CHECKPOINT_WRAPPER,
)
from ckptlint.model.script_models.names import absolute_names as qualified_absolute_names
from ckptlint.model.syntax.names import module_name
from ckptlint.model.form.values import Instance, ordering_key
from ckptlint.model.form.summary import dotted_expression

if TYPE_CHECKING:
    from ckptlint.rule import FileContext

PARTIAL = "functools.partial"


def absolute_names(context: FileContext, expr: cst.BaseExpression) -> set[str]:
    """The absolute names an expression may refer to: imports as imported, the file's own
    definitions prefixed with its module, relative imports resolved against it."""
    return qualified_absolute_names(context.qualified_names(expr), context.relative_path)


def resolves_to(context: FileContext, expr: cst.BaseExpression, candidates: frozenset[str] | set[str]) -> bool:
    """Every binding of `expr` is one of `candidates` (and there is one)."""
    names = absolute_names(context, expr)
    return bool(names) and names <= candidates


def project_fsdp(context: FileContext) -> str | None:
    """How the project uses torch FSDP, for a message; None when it does not (or `fsdp = "no"`)."""
    mode = context.settings.fsdp
    if mode == "no":
        return None
    if mode == "yes":
        return '`fsdp = "yes"` in the configuration'
    uses = context.project.fsdp_uses_reaching(context.relative_path)
    if not uses:
        return None
    # The file's own use first (its own code, or a launch of it): that is the one the
    # reader sees; then a launch of a file that imports it.
    relative = context.relative_path
    own = [use for use in uses if relative in (use.path, use.launched)]
    near = [use for use in uses if use.launched and relative in context.project.imported_by(use.launched)]
    return describe_use((own or near or list(uses))[0])


def fsdp2_only(context: FileContext) -> bool:
    """Whether every FSDP use that reaches the file is FSDP2 (`fully_shard`, or an
    `accelerate launch` whose config says `fsdp_version: 2`); False under `fsdp = "yes"`."""
    if context.settings.fsdp != "auto":
        return False
    uses = context.project.fsdp_uses_reaching(context.relative_path)
    return bool(uses) and all(use.is_fsdp2 for use in uses)


def describe_use(use: FsdpUse) -> str:
    if use.kind is FsdpKind.ACCELERATE_LAUNCH:
        how = f"--config_file {use.config}" if use.config else "--use_fsdp"
        return f"`accelerate launch {how}` of {use.launched} at {use.path}:{use.line}"
    return f"`{use.kind.value}` at {use.path}:{use.line}"


def fsdp_reaching_class(context: FileContext, owner: str | None) -> str | None:
    """How FSDP reaches the model holding a checkpoint in a method of class `owner`, for a
    message: the FSDP1 / FSDP2 wrap whose model holds an instance of `owner` (the class,
    a subclass, or a module somewhere among its children), described with the model it
    wraps. Without such a wrap: a use whose model is not known (a `Trainer`'s `fsdp=`, an
    accelerate plugin, a wrap of a value the model cannot follow) rather than one known to
    wrap another model; then `project_fsdp`'s choice."""
    general = project_fsdp(context)
    if general is None or owner is None or context.settings.fsdp == "yes":
        return general
    uses = context.project.fsdp_uses_reaching(context.relative_path)
    ordered = sorted(uses, key=lambda use: use.path != context.relative_path)
    unknown: FsdpUse | None = None
    for use in ordered:
        wrapped = _wrapped_models(context.project, use)
        if not wrapped:
            unknown = unknown or use
            continue
        for target, models in wrapped:
            holder = next((m for m in sorted(models, key=ordering_key) if _holds(context.project, m, owner, set())), None)
            if holder is not None:
                return f"{describe_use(use)}, which wraps `{target}`, a `{holder.short_name}`"
    return describe_use(unknown) if unknown is not None else general


def fsdp_misses_class(context: FileContext, owner: str | None) -> bool:
    """Whether every FSDP use that reaches the file wraps models the project model knows,
    and none of them holds an instance of class `owner` (a frozen text encoder sharded by
    a helper, the checkpointed denoiser never): FSDP does not reach the checkpoint there.
    False when any use's model is not known (a `Trainer`'s `fsdp=`, an accelerate plugin,
    a wrap of a value the model cannot follow), or `fsdp = "yes"` is configured."""
    if owner is None or context.settings.fsdp != "auto":
        return False
    uses = context.project.fsdp_uses_reaching(context.relative_path)
    if not uses:
        return False
    for use in uses:
        wrapped = _wrapped_models(context.project, use)
        if not wrapped:
            return False
        if any(
            _holds(context.project, model, owner, set()) or shares_project_class(context.project, model, owner)
            for _, models in wrapped for model in models
        ):
            return False
    return True


def fsdp2_holds_class(context: FileContext, owner: str | None) -> bool:
    """Whether only FSDP2 reaches the model holding class `owner`: some `fully_shard` use
    that reaches the file wraps a model holding it (or of a related class), every use
    whose model is not known is FSDP2 too, and no FSDP1 use's model holds it. The FSDP1
    wraps of other models the project shards (another script's) do not reach it."""
    if owner is None or context.settings.fsdp != "auto":
        return False
    holding = False
    for use in context.project.fsdp_uses_reaching(context.relative_path):
        wrapped = _wrapped_models(context.project, use)
        holds = not wrapped or any(
            _holds(context.project, model, owner, set()) or shares_project_class(context.project, model, owner)
            for _, models in wrapped for model in models
        )
        if holds and not use.is_fsdp2:
            return False
        holding = holding or (holds and bool(wrapped))
    return holding


def shares_project_class(project: ProjectIndex, model, owner: str) -> bool:
    """Whether the wrapped model's class and `owner` share a class of the project (one
    subclasses the other, or both a common base): a table or a config default may pick the
    wrapped class where a run picks the other (`ARCHS[cfg.arch](...)`)."""
    if not isinstance(model, Instance):
        return False
    mine = {c for c in project.ancestors(owner) if project.class_named(c) is not None}
    return bool(mine & {c for c in project.ancestors(model.cls) if project.class_named(c) is not None})


_FSDP_EVENTS = (EventKind.FSDP1, EventKind.FSDP2)


def _wrapped_models(project: ProjectIndex, use: FsdpUse) -> list[tuple[str, frozenset]]:
    """The module instances an FSDP1 / FSDP2 call wraps, by the name it wraps; empty when
    none is known."""
    if use.kind not in (FsdpKind.FSDP1, FsdpKind.FSDP2):
        return []
    denotation = project.denotation
    module = module_name(use.path)
    found = []
    for function in project.functions_with_event(use.path, _FSDP_EVENTS, use.line):
        for event in function.events:
            if event.kind not in _FSDP_EVENTS or event.line != use.line:
                continue
            owner_class, _, _ = function.name.rpartition(".")
            self_instance = denotation.instance(owner_class) if project.class_named(owner_class) else None
            frame = replace(denotation.frame_of(function.name, module, self_instance), before=event.line + 1)
            models = frozenset(v for v in denotation.evaluate(dotted_expression(event.target), frame) if isinstance(v, Instance))
            if models:
                found.append((event.target, models))
    return found


def holds_instance_of(project: ProjectIndex, value, owner: str) -> bool:
    """Whether a module instance is, or holds among its children, an instance of class `owner`."""
    return _holds(project, value, owner, set())


def _holds(project: ProjectIndex, value, owner: str, seen: set[str], depth: int = 0) -> bool:
    """Whether a module instance is, or holds among its children, an instance of `owner`."""
    if not isinstance(value, Instance) or depth > 16 or len(seen) > 256:
        return False
    if value.members is not None:
        return any(_holds(project, member, owner, seen, depth + 1) for members in value.members for member in members)
    if owner in project.ancestors(value.cls):
        return True
    if value.cls in seen:
        return False
    seen.add(value.cls)
    children = project.denotation.children(value)
    return any(
        _holds(project, child, owner, seen, depth + 1) for name in sorted(children) for child in sorted(children[name], key=ordering_key)
    )


def checkpoint_wrapper_impl(context: FileContext, call: cst.Call) -> tuple[Impl, cst.BaseExpression | None]:
    """The implementation a `checkpoint_wrapper(module, checkpoint_impl=...)` call (or a
    `partial(checkpoint_wrapper, ...)`) selects, and the expression that selects it."""
    partial = is_partial(context, call)
    # A partial binds the implementation by keyword; a call may also pass it second.
    arguments = list(call.args[1:] if partial else call.args)
    value = None
    for arg in arguments:
        if arg.keyword is not None and arg.keyword.value == "checkpoint_impl":
            value = arg.value
    positional = [arg for arg in arguments if arg.keyword is None and not arg.star]
    if value is None and not partial and len(positional) >= 2:
        value = positional[1].value
    if any(arg.star for arg in arguments) and value is None:
        return Impl.UNKNOWN, None
    if value is None:
        return Impl.NON_REENTRANT, None  # torch's default
    names = absolute_names(context, value)
    if names == {CHECKPOINT_IMPL_REENTRANT}:
        return Impl.REENTRANT, value
    if names == {CHECKPOINT_IMPL_NO_REENTRANT}:
        return Impl.NON_REENTRANT, value
    return Impl.UNKNOWN, value


def is_partial(context: FileContext, call: cst.Call) -> bool:
    return PARTIAL in absolute_names(context, call.func)


def is_checkpoint_wrapper(context: FileContext, call: cst.Call) -> bool:
    """`checkpoint_wrapper(...)` or `partial(checkpoint_wrapper, ...)`; also a call of a
    project function that hands everything on to it (xtuner's own `checkpoint_wrapper`)."""
    if resolves_to(context, call.func, CHECKPOINT_WRAPPER):
        return True
    names = absolute_names(context, call.func)
    if names and all(context.project.hands_on_to_checkpoint_wrapper(name) for name in names):
        return True
    return (
        is_partial(context, call)
        and bool(call.args)
        and call.args[0].keyword is None
        and resolves_to(context, call.args[0].value, CHECKPOINT_WRAPPER)
    )


def wrapper_applications(context: FileContext, calls: list[cst.Call], bound: cst.Name) -> list[str]:
    """Where the checkpoint wrapper bound to `bound` (`reentrant = partial(checkpoint_wrapper,
    ...)`) is applied, for a message: the file's `apply_activation_checkpointing` calls given
    it as `checkpoint_wrapper_fn`, and those given a parameter whose default it is, with the
    project's calls that leave that parameter out."""
    path = context.relative_path
    names = absolute_names(context, bound)
    if not names:
        return []
    found = []
    for call in calls:
        wrapper_fn = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "checkpoint_wrapper_fn"), None)
        if (
            isinstance(wrapper_fn, cst.Name)
            and absolute_names(context, wrapper_fn) == names
            and absolute_names(context, call.func) & APPLY_ACTIVATION_CHECKPOINTING
        ):
            found.append(f"`apply_activation_checkpointing` at {path}:{context.position(call).start.line}")
    project = context.project
    facts = project.files.get(path)
    for function in facts.functions if facts is not None else ():
        summary = project.denotation.summary(function.name)
        for event in function.events if summary is not None else ():
            if event.kind is not EventKind.CHECKPOINT or not event.wrapper_parameter:
                continue
            declared = next((p for p in summary.parameters if p.name == event.wrapper_parameter), None)
            if declared is None or declared.default != ("name", bound.value):
                continue
            short = function.name.rsplit(".", 1)[-1]
            callers = sorted(
                {f"{caller_path}:{line}" for caller_path, caller, _, line in project.call_sites.of(function.name, facts.module)
                 if not project.denotation.passed_at_call(function.name, declared.name, caller.name, line)[1]}
            )
            called = f", called at {', '.join(callers)}" if callers else ""
            found.append(
                f"`apply_activation_checkpointing` at {path}:{event.line} as the default of `{short}`'s "
                f"`{declared.name}`{called}"
            )
    return found


@dataclass(frozen=True)
class WrapStep:
    """A wrap done to a model object in one function (FSDP, a checkpoint wrapper, gradient
    checkpointing turned on), from the index's events: directly (`event` is the call), or
    inside a project function it was passed to (`event` is that call, `effect` says what
    the function did and where)."""

    kind: EventKind
    model: int  # the same number for names bound to the same object
    name: str  # the name it has in this function
    event: Event
    effect: ParameterEffect | None
    impl: Impl
    auto_wrap: bool

    def where(self, path: str) -> str:
        if self.effect is None:
            return f"{path}:{self.event.line}"
        return f"{self.effect.path}:{self.effect.line}, through `{self.effect.function.rsplit('.', 1)[-1]}` at {path}:{self.event.line}"


_STEP_KINDS = frozenset({EventKind.CHECKPOINT, EventKind.FSDP1, EventKind.FSDP2, EventKind.HF_GC, EventKind.RUNS_CHECKPOINTED})


def wrap_steps(function: FunctionFacts, project: ProjectIndex) -> list[WrapStep]:
    """What `function` does to the model objects it names, in order, aliases followed
    (`fsdp_model = FSDP(model)` is the same model's layers)."""
    models: dict[str, int] = {}

    def model_of(name: str) -> int:
        return models.setdefault(name, len(models))

    steps: list[WrapStep] = []
    for event in function.events:
        if event.kind is EventKind.ALIAS:
            models[event.target] = model_of(event.source)
        elif event.kind is EventKind.CALL or (
            event.kind is EventKind.BUILT_FOR_CALL and project.returns_parameter(event.callee, event.parameter)
        ):
            for effect in project.parameter_effects(event.callee, event.parameter, (function.name, event.line)):
                steps.append(
                    WrapStep(effect.kind, model_of(event.target), event.target, event, effect, effect.impl, effect.auto_wrap)
                )
        elif event.kind in _STEP_KINDS:
            impl = event.impl
            if event.wrapper_local:  # `checkpoint_wrapper_fn=wrapper`, a partial the facts cannot tell
                impl, _ = project.local_wrapper_at(function.name, event.wrapper_local, event.line, None)
            steps.append(WrapStep(event.kind, model_of(event.target), event.target, event, None, impl, event.auto_wrap))
    return steps


def call_at(context: FileContext, calls: list[cst.Call], line: int, byte_column: int) -> cst.Call | None:
    """The collected call starting at `line` and the 0-based UTF-8 `byte_column` (as `ast`
    reports positions)."""
    text_line = context.line_index.line(line)
    column = len(text_line.encode("utf-8")[:byte_column].decode("utf-8", errors="replace"))
    for call in calls:
        position = context.position(call)
        if position.start.line == line and position.start.column == column:
            return call
    return None
