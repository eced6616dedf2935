"""Checkpoint sites: the calls that run (or configure) torch activation checkpointing.

Names are resolved, never matched as text. Every form below reaches the same site:

    from torch.utils.checkpoint import checkpoint as ck; ck(f, x)
    import torch.utils.checkpoint as cp; cp.checkpoint(f, x)
    from torch.utils import checkpoint as m; m.checkpoint(f, x)
    run = torch.utils.checkpoint.checkpoint; run(f, x)
    ck = functools.partial(torch.utils.checkpoint.checkpoint, use_reentrant=False); ck(f, x)
    self.ckpt = partial(checkpoint, ...)  (in __init__);  self.ckpt(f, x)  (in forward)

while a project's own `checkpoint` (a model-saving helper, timm's or fairseq's wrapper,
`jax.checkpoint`, DeepSpeed's) resolves to its own qualified name and is no site.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import QualifiedName

PARTIAL = "functools.partial"

# Lookups the engine provides, so the resolver stays independent of the traversal.
QualifiedNameLookup = Callable[[cst.BaseExpression], "set[QualifiedName]"]
AssignedValueLookup = Callable[[cst.Name], "Sequence[cst.BaseExpression]"]


class CheckpointApi(str, enum.Enum):
    CHECKPOINT = "torch.utils.checkpoint.checkpoint"
    CHECKPOINT_SEQUENTIAL = "torch.utils.checkpoint.checkpoint_sequential"

    @property
    def short_name(self) -> str:
        return self.value.rsplit(".", 1)[1]


API_BY_QUALIFIED_NAME = {api.value: api for api in CheckpointApi}

# The keyword arguments `torch.utils.checkpoint.checkpoint` itself consumes (torch 2.13);
# `preserve_rng_state` is popped from **kwargs before the reentrant check.
CHECKPOINT_OWN_KEYWORDS = frozenset(
    {"use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug", "early_stop"}
)
# Accepted by the signature, but the reentrant implementation raises ValueError for them.
NON_REENTRANT_ONLY_KEYWORDS = frozenset({"context_fn", "debug"})


class SiteKind(str, enum.Enum):
    CALL = "call"  # checkpointing runs here: checkpoint(fn, x)
    PARTIAL = "partial"  # a configured checkpoint callable is built here: partial(checkpoint, ...)


class Reentrancy(str, enum.Enum):
    EXPLICIT_TRUE = "use_reentrant=True"
    EXPLICIT_FALSE = "use_reentrant=False"
    IMPLICIT = "omitted (torch defaults to reentrant)"
    UNKNOWN = "not known statically"

    @property
    def is_reentrant(self) -> bool:
        return self in (Reentrancy.EXPLICIT_TRUE, Reentrancy.IMPLICIT)


@dataclass(frozen=True)
class KeywordValue:
    name: str
    value: cst.BaseExpression
    call: cst.Call  # the call (the site itself, or a partial) the keyword is written in


@dataclass(frozen=True)
class CheckpointSite:
    node: cst.Call
    kind: SiteKind
    api: CheckpointApi
    keywords: Mapping[str, KeywordValue]
    has_star_kwargs: bool
    # Positional arguments after the callable / module list (the checkpointed inputs).
    positional: tuple[cst.Arg, ...]
    function: cst.BaseExpression | None
    via_partial: cst.Call | None = None

    @property
    def reentrancy(self) -> Reentrancy:
        keyword = self.keywords.get("use_reentrant")
        if keyword is None:
            return Reentrancy.UNKNOWN if self.has_star_kwargs else Reentrancy.IMPLICIT
        return literal_bool(keyword.value)

    def extra_keywords(self) -> list[str]:
        """Keywords meant for the checkpointed function rather than for checkpoint itself."""
        return sorted(name for name in self.keywords if name not in CHECKPOINT_OWN_KEYWORDS)


def literal_bool(expr: cst.BaseExpression) -> Reentrancy:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return Reentrancy.EXPLICIT_TRUE if expr.value == "True" else Reentrancy.EXPLICIT_FALSE
    return Reentrancy.UNKNOWN


@dataclass(frozen=True)
class ResolvedCallable:
    """What an expression evaluates to, when it is a (possibly partially applied) torch API."""

    api: CheckpointApi
    keywords: Mapping[str, KeywordValue]
    has_star_kwargs: bool
    bound_positional: int  # positional arguments bound by partials
    partial: cst.Call | None


class CallableResolver:
    """Resolves expressions to torch checkpoint APIs through imports, assignments, partials
    and `self.<attr>` assignments made anywhere in the class."""

    MAX_DEPTH = 8

    def __init__(
        self,
        qualified_names: QualifiedNameLookup,
        assigned_values: AssignedValueLookup,
        self_attribute_values: Mapping[tuple[cst.ClassDef, str], Sequence[cst.BaseExpression]],
    ) -> None:
        self._qualified_names = qualified_names
        self._assigned_values = assigned_values
        self._self_attribute_values = self_attribute_values

    def resolve(
        self, expr: cst.BaseExpression, enclosing_class: cst.ClassDef | None, depth: int = 0
    ) -> ResolvedCallable | None:
        if depth > self.MAX_DEPTH:
            return None
        names = self._qualified_names(expr)
        if names:
            # Every binding must be torch's: `checkpoint` imported from DeepSpeed on one branch
            # and from torch on another is not known to be torch's.
            apis = {API_BY_QUALIFIED_NAME.get(q.name) for q in names}
            if len(apis) == 1 and None not in apis:
                return ResolvedCallable(apis.pop(), {}, False, 0, None)
        if isinstance(expr, cst.Call):
            return self._resolve_partial(expr, enclosing_class, depth)
        if isinstance(expr, cst.Name):
            return self._resolve_single(self._assigned_values(expr), enclosing_class, depth)
        if (
            isinstance(expr, cst.Attribute)
            and isinstance(expr.value, cst.Name)
            and expr.value.value == "self"
            and enclosing_class is not None
        ):
            values = self._self_attribute_values.get((enclosing_class, expr.attr.value), ())
            return self._resolve_single(values, enclosing_class, depth)
        return None

    def _resolve_single(
        self, values: Sequence[cst.BaseExpression] | None, enclosing_class, depth: int
    ) -> ResolvedCallable | None:
        # A name bound once (or always to the same API) resolves; anything else is unknown.
        if not values:
            return None
        resolved = [self.resolve(value, enclosing_class, depth + 1) for value in values]
        if len(resolved) != 1 or resolved[0] is None:
            return None
        return resolved[0]

    def _resolve_partial(self, call: cst.Call, enclosing_class, depth: int) -> ResolvedCallable | None:
        if not self.is_partial(call) or not call.args or call.args[0].keyword or call.args[0].star:
            return None
        inner = self.resolve(call.args[0].value, enclosing_class, depth + 1)
        if inner is None:
            return None
        keywords = dict(inner.keywords)
        has_star_kwargs = inner.has_star_kwargs
        bound_positional = inner.bound_positional
        for arg in call.args[1:]:
            if arg.star == "**":
                has_star_kwargs = True
            elif arg.star == "*":
                return None  # an unknown number of bound positionals: give up
            elif arg.keyword is not None:
                keywords[arg.keyword.value] = KeywordValue(arg.keyword.value, arg.value, call)
            else:
                bound_positional += 1
        return ResolvedCallable(inner.api, keywords, has_star_kwargs, bound_positional, call)

    def is_partial(self, call: cst.Call) -> bool:
        return any(q.name == PARTIAL for q in self._qualified_names(call.func))

    def site_for_call(self, call: cst.Call, enclosing_class: cst.ClassDef | None) -> CheckpointSite | None:
        """The site a call is, if it runs a resolved checkpoint API or builds a partial of one."""
        if self.is_partial(call):
            resolved = self._resolve_partial(call, enclosing_class, 0)
            if resolved is None:
                return None
            return CheckpointSite(
                node=call,
                kind=SiteKind.PARTIAL,
                api=resolved.api,
                keywords=resolved.keywords,
                has_star_kwargs=resolved.has_star_kwargs,
                positional=(),
                function=_first_positional(call.args[1:]) if resolved.bound_positional else None,
            )
        resolved = self.resolve(call.func, enclosing_class)
        if resolved is None:
            return None
        keywords = dict(resolved.keywords)
        has_star_kwargs = resolved.has_star_kwargs
        positional: list[cst.Arg] = []
        for arg in call.args:
            if arg.star == "**":
                has_star_kwargs = True
            elif arg.keyword is not None:
                keywords[arg.keyword.value] = KeywordValue(arg.keyword.value, arg.value, call)
            else:
                positional.append(arg)
        function = None
        if resolved.bound_positional == 0 and positional and not positional[0].star:
            function = positional[0].value
        skip = max(0, (2 if resolved.api is CheckpointApi.CHECKPOINT_SEQUENTIAL else 1) - resolved.bound_positional)
        return CheckpointSite(
            node=call,
            kind=SiteKind.CALL,
            api=resolved.api,
            keywords=keywords,
            has_star_kwargs=has_star_kwargs,
            positional=tuple(positional[skip:]),
            function=function,
            via_partial=resolved.partial,
        )


def _first_positional(args: Sequence[cst.Arg]) -> cst.BaseExpression | None:
    for arg in args:
        if arg.keyword is None and not arg.star:
            return arg.value
    return None


