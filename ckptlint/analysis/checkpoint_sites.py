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

import ast
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.model.library.torch import Reentrancy
from ckptlint.model.form import values as model_values

if TYPE_CHECKING:
    from ckptlint.model.script_models.names import QualifiedName

PARTIAL = "functools.partial"

# Lookups the engine provides, so the resolver stays independent of the traversal.
QualifiedNameLookup = Callable[["cst.BaseExpression"], "frozenset[QualifiedName]"]
AssignedValueLookup = Callable[["cst.Name"], "Sequence[cst.BaseExpression]"]


class CheckpointApi(str, enum.Enum):
    CHECKPOINT = "torch.utils.checkpoint.checkpoint"
    CHECKPOINT_SEQUENTIAL = "torch.utils.checkpoint.checkpoint_sequential"

    @property
    def short_name(self) -> str:
        return self.value.rsplit(".", 1)[1]


API_BY_QUALIFIED_NAME = {api.value: api for api in CheckpointApi}
_API_SHORT_NAMES = frozenset(api.short_name for api in CheckpointApi)

# Every way to reach torch.utils.checkpoint in a file spells one of these (`import
# torch.utils.checkpoint`, `from torch.utils import checkpoint`, `torch.utils.checkpoint.x`,
# `import torch.utils as tu; tu.checkpoint.x`, `from torch import utils`): a file without
# them has no site; and every one of them names `checkpoint` (SITE_REQUIRES), which keeps
# the many `from torch.utils import data` files out.
SITE_REQUIRES = (b"checkpoint",)
SITE_TRIGGERS = (b"utils.checkpoint", b"torch.utils import", b"import torch.utils as", b"from torch import utils")


def may_hold_sites(tree: ast.Module, project_aliases: Iterable[str]) -> bool:
    """Whether CPython's tree of a file can hold a checkpoint site: a name resolves to
    `torch.utils.checkpoint.<function>` only where the code writes `checkpoint` (the module,
    imported or as an attribute), and to a name another module of the project binds to one
    (`ProjectIndex.checkpoint_aliases`: `pkg.utils.ckpt`) only where it writes `ckpt`.
    Comments and strings (an FSDP file's docstrings about state-dict checkpoints) do not count."""
    wanted = {"checkpoint", *(alias.rsplit(".", 1)[-1] for alias in project_aliases)}
    return any(not wanted.isdisjoint(written_names(node)) for node in ast.walk(tree))


def written_names(node: ast.AST) -> tuple[str, ...]:
    """The names a node of CPython's tree writes in code: a name, an attribute, the parts of
    an import's dotted name and its alias, the parts of a `from` import's module."""
    if isinstance(node, ast.Name):
        return (node.id,)
    if isinstance(node, ast.Attribute):
        return (node.attr,)
    if isinstance(node, ast.alias):
        return (*node.name.split("."), *((node.asname,) if node.asname else ()))
    if isinstance(node, ast.ImportFrom) and node.module:
        return tuple(node.module.split("."))
    return ()


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


@dataclass(frozen=True)
class KeywordValue:
    name: str
    value: cst.BaseExpression
    # The call (the site itself, or a partial) the keyword is written in; None for an entry
    # of a dict splatted into the call (`**ckpt_kwargs`), which `entry` / `container` give.
    call: cst.Call | None
    # The dict's entry and the dict: a display (`{"use_reentrant": False}`), or the
    # `dict(use_reentrant=False)` call and its argument.
    entry: cst.DictElement | cst.Arg | None = None
    container: cst.Dict | cst.Call | None = None


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
    # The partials the call goes through, innermost first, then the site's own call; and
    # those of them that splat `**kwargs` (which may override keywords bound earlier).
    call_chain: tuple[cst.Call, ...] = ()
    star_kwargs_calls: frozenset[cst.Call] = frozenset()
    # What else the called name may be bound to (`checkpoint` imported from DeepSpeed on one
    # branch, from torch on another): only for the sites of `FileContext.possible_sites`.
    alternatives: tuple[str, ...] = ()
    # A partial of another module the call goes through (`from .ckpt import reentrant_ckpt`):
    # its own file is where what it binds (or leaves out) is reported.
    imported_partial: str | None = None

    @property
    def reentrancy(self) -> Reentrancy:
        keyword = self.keywords.get("use_reentrant")
        if keyword is None:
            return Reentrancy.UNKNOWN if self.has_star_kwargs else Reentrancy.IMPLICIT
        if self._overridable(keyword):
            return Reentrancy.UNKNOWN
        return literal_bool(keyword.value)

    def _overridable(self, keyword: KeywordValue) -> bool:
        # `**kw` in the same call cannot repeat a keyword written there (TypeError), but a
        # splat in a later call of the chain replaces what an earlier partial bound.
        if keyword.call not in self.call_chain:
            return self.has_star_kwargs
        position = self.call_chain.index(keyword.call)
        return any(self.call_chain.index(c) > position for c in self.star_kwargs_calls if c in self.call_chain)

    def extra_keywords(self) -> list[str]:
        """Keywords meant for the checkpointed function rather than for checkpoint itself."""
        return sorted(name for name in self.keywords if name not in CHECKPOINT_OWN_KEYWORDS)

    def non_reentrant_only_keywords(self) -> list[str]:
        """`context_fn` / `debug` set to something the reentrant implementation rejects."""
        found = []
        context_fn = self.keywords.get("context_fn")
        if context_fn is not None and not (
            isinstance(context_fn.value, cst.Name) and context_fn.value.value == "noop_context_fn"
        ):
            found.append("context_fn")
        debug = self.keywords.get("debug")
        if debug is not None and literal_bool(debug.value) is Reentrancy.EXPLICIT_TRUE:
            found.append("debug")
        return found


def _literal(value: object) -> cst.BaseExpression:
    """A flag another module binds (True, False, None), as the expression that writes it."""
    return cst.Name(repr(value))


def literal_bool(expr: cst.BaseExpression) -> Reentrancy:
    if isinstance(expr, cst.Name) and expr.value in ("True", "False"):
        return Reentrancy.EXPLICIT_TRUE if expr.value == "True" else Reentrancy.EXPLICIT_FALSE
    return Reentrancy.UNKNOWN


@dataclass(frozen=True)
class ResolvedCallable:
    """What an expression evaluates to, when it is a (possibly partially applied) torch API."""

    api: CheckpointApi
    keywords: Mapping[str, KeywordValue]
    positional: tuple[cst.Arg, ...]  # bound by partials, in order
    chain: tuple[cst.Call, ...]  # the partials, innermost first
    star_kwargs_calls: frozenset[cst.Call]
    imported_partial: str | None = None  # a partial of another module (`checkpoint_alias_keywords`)

    @property
    def partial(self) -> cst.Call | None:
        return self.chain[-1] if self.chain else None


class CallableResolver:
    """Resolves expressions to torch checkpoint APIs through imports, assignments, partials
    and `self.<attr>` assignments made anywhere in the class."""

    MAX_DEPTH = 8

    def __init__(
        self,
        qualified_names: QualifiedNameLookup,
        assigned_values: AssignedValueLookup,
        self_attribute_values: Mapping[tuple[cst.ClassDef, str], Sequence[cst.BaseExpression]],
        project_alias: Callable[[QualifiedName], str | None] = lambda name: None,
        alias_keywords: Callable[[QualifiedName], tuple[str, tuple[tuple[str, object], ...]] | None] = lambda name: None,
        returned_alias: Callable[[QualifiedName], tuple[str, tuple[str, ...]] | None] = lambda name: None,
    ) -> None:
        self._qualified_names = qualified_names
        self._assigned_values = assigned_values
        self._self_attribute_values = self_attribute_values
        # The torch function a name of another project module stands for
        # (`ProjectIndex.checkpoint_aliases`), else None.
        self._project_alias = project_alias
        # A partial of another module: its absolute name and the literal flags it binds.
        self._alias_keywords = alias_keywords
        # A project getter's call (`get_checkpoint_fn()`): the torch function it returns, and
        # the other libraries' functions it may return instead.
        self._returned_alias = returned_alias

    def resolve(
        self, expr: cst.BaseExpression, enclosing_class: cst.ClassDef | None, depth: int = 0
    ) -> ResolvedCallable | None:
        if depth > self.MAX_DEPTH:
            return None
        names = self._qualified_names(expr)
        if names:
            # Every binding must be torch's: `checkpoint` imported from DeepSpeed on one branch
            # and from torch on another is not known to be torch's.
            apis = {API_BY_QUALIFIED_NAME.get(q.name) or API_BY_QUALIFIED_NAME.get(self._project_alias(q) or "") for q in names}
            if len(apis) == 1 and None not in apis:
                partial = self._alias_keywords(next(iter(names))) if len(names) == 1 else None
                if partial is None:
                    return ResolvedCallable(apis.pop(), {}, (), (), frozenset())
                keywords = {name: KeywordValue(name, _literal(value), None) for name, value in partial[1]}
                return ResolvedCallable(apis.pop(), keywords, (), (), frozenset(), imported_partial=partial[0])
            if self._torch_or_none(expr, names, apis):
                return ResolvedCallable((apis - {None}).pop(), {}, (), (), frozenset())
        if isinstance(expr, cst.Call):
            returned = self.getter_result(expr)
            if returned is not None:
                return ResolvedCallable(API_BY_QUALIFIED_NAME[returned[0]], {}, (), (), frozenset()) if not returned[1] else None
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

    def getter_result(self, call: cst.Call) -> tuple[str, tuple[str, ...]] | None:
        """What a call of a project getter without arguments returns: (torch function,
        other libraries' functions it may return instead)."""
        if call.args:
            return None
        for name in self._qualified_names(call.func):
            returned = self._returned_alias(name)
            if returned is not None and returned[0] in API_BY_QUALIFIED_NAME:
                return returned
        return None

    def _torch_or_none(self, expr: cst.BaseExpression, names, apis) -> bool:
        """`try: from torch.utils.checkpoint import checkpoint` / `except ImportError:
        checkpoint = None`: None cannot be called, so where a call of the name runs, the name
        is torch's. Every other binding of the name must be such a `None` assignment."""
        if not isinstance(expr, cst.Name) or len(apis - {None}) != 1 or None not in apis:
            return False
        others = [q for q in names if API_BY_QUALIFIED_NAME.get(q.name) is None]
        assigned = self._assigned_values(expr, imports=False)
        return (
            all(q.name == expr.value for q in others)
            and bool(assigned)
            and all(isinstance(value, cst.Name) and value.value == "None" for value in assigned)
        )

    def _resolve_single(
        self, values: Sequence[cst.BaseExpression] | None, enclosing_class, depth: int
    ) -> ResolvedCallable | None:
        # A name bound once resolves; anything else is unknown. `None` placeholders
        # (`self.ckpt_fn = None` until checkpointing is enabled) cannot be called: skipped.
        values = [v for v in values or () if not (isinstance(v, cst.Name) and v.value == "None")]
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
        keywords, positional, has_splat = _split_arguments(call, call.args[1:], self._splatted_dict(enclosing_class))
        return ResolvedCallable(
            inner.api,
            {**inner.keywords, **keywords},
            inner.positional + positional,
            inner.chain + (call,),
            inner.star_kwargs_calls | ({call} if has_splat else set()),
        )

    def is_partial(self, call: cst.Call) -> bool:
        return any(q.name == PARTIAL for q in self._qualified_names(call.func))

    def site_for_call(self, call: cst.Call, enclosing_class: cst.ClassDef | None) -> CheckpointSite | None:
        """The site a call is, if it runs a resolved checkpoint API or builds a partial of one."""
        if self.is_partial(call):
            resolved = self._resolve_partial(call, enclosing_class, 0)
            return None if resolved is None else _site(call, SiteKind.PARTIAL, resolved, {}, (), False)
        resolved = self.resolve(call.func, enclosing_class)
        if resolved is None:
            return None
        keywords, positional, has_splat = _split_arguments(call, call.args, self._splatted_dict(enclosing_class))
        return _site(call, SiteKind.CALL, resolved, keywords, positional, has_splat)

    def possible_site_for_call(self, call: cst.Call, enclosing_class: cst.ClassDef | None) -> CheckpointSite | None:
        """A call of a name that one import binds to torch's `checkpoint` and another to
        something else (DeepSpeed's, in a `try` / `if` on the environment): the site it is
        where torch's is the one bound, with the other bindings as its `alternatives`."""
        func = call.func
        written = func.value if isinstance(func, cst.Name) else func.attr.value if isinstance(func, cst.Attribute) else None
        if isinstance(func, cst.Name):
            values = self._assigned_values(func)
            returned = self.getter_result(values[0]) if len(values) == 1 and isinstance(values[0], cst.Call) else None
            if returned is not None and returned[1]:  # `checkpoint = get_checkpoint_fn()`: DeepSpeed's or torch's
                keywords, positional, has_splat = _split_arguments(call, call.args, self._splatted_dict(enclosing_class))
                resolved = ResolvedCallable(API_BY_QUALIFIED_NAME[returned[0]], {}, (), (), frozenset())
                return replace(_site(call, SiteKind.CALL, resolved, keywords, positional, has_splat), alternatives=returned[1])
        if written not in _API_SHORT_NAMES:  # the common case, decided without a name lookup
            return None
        names = {q.name for q in self._qualified_names(func)}
        apis = {API_BY_QUALIFIED_NAME.get(name) for name in names}
        torch_apis = apis - {None}
        if len(torch_apis) != 1 or None not in apis:
            return None
        keywords, positional, has_splat = _split_arguments(call, call.args, self._splatted_dict(enclosing_class))
        resolved = ResolvedCallable(torch_apis.pop(), {}, (), (), frozenset())
        site = _site(call, SiteKind.CALL, resolved, keywords, positional, has_splat)
        return replace(site, alternatives=tuple(sorted(name for name in names if name not in API_BY_QUALIFIED_NAME)))

    def _splatted_dict(self, enclosing_class: cst.ClassDef | None) -> Callable[[cst.BaseExpression], cst.Dict | cst.Call | None]:
        """The dict literal a `**` argument splats, when it is one: written there, or a name
        (or `self.<attr>`) bound once to one (also `dict(key=value, ...)`). Its entries are known keywords; the splat still
        counts as one (the dict may gain keys elsewhere)."""

        def literal(expr: cst.BaseExpression) -> cst.Dict | cst.Call | None:
            values: Sequence[cst.BaseExpression] = [expr]
            if isinstance(expr, cst.Name):
                values = self._assigned_values(expr)
            elif isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Name) and expr.value.value == "self":
                values = self._self_attribute_values.get((enclosing_class, expr.attr.value), ()) if enclosing_class else ()
            if len(values) != 1:
                return None
            if isinstance(values[0], cst.Dict):
                found = values[0]
                if all(isinstance(e, cst.DictElement) and isinstance(e.key, cst.SimpleString) for e in found.elements):
                    return found
                return None
            return values[0] if _is_dict_call(values[0]) else None

        return literal


def _split_arguments(
    call: cst.Call,
    args: Sequence[cst.Arg],
    splatted_dict: Callable[[cst.BaseExpression], cst.Dict | cst.Call | None] | None = None,
) -> tuple[dict[str, KeywordValue], tuple[cst.Arg, ...], bool]:
    keywords: dict[str, KeywordValue] = {}
    positional: list[cst.Arg] = []
    has_splat = False
    for arg in args:
        if arg.star == "**":
            has_splat = True
            dictionary = splatted_dict(arg.value) if splatted_dict is not None else None
            if isinstance(dictionary, cst.Call):  # `dict(use_reentrant=False, ...)`
                entries = [(entry.keyword.value, entry) for entry in dictionary.args]
            else:
                entries = [(e.key.evaluated_value, e) for e in (dictionary.elements if dictionary is not None else ())]
            for name, entry in entries:
                if isinstance(name, str) and name not in keywords:
                    keywords[name] = KeywordValue(name, entry.value, None, entry, dictionary)
        elif arg.keyword is not None:
            keywords[arg.keyword.value] = KeywordValue(arg.keyword.value, arg.value, call)
        else:
            positional.append(arg)
    return keywords, tuple(positional), has_splat


def _site(
    call: cst.Call,
    kind: SiteKind,
    resolved: ResolvedCallable,
    keywords: dict[str, KeywordValue],
    positional: tuple[cst.Arg, ...],
    has_splat: bool,
) -> CheckpointSite:
    all_keywords = {**resolved.keywords, **keywords}
    all_positional = resolved.positional + positional
    star_calls = resolved.star_kwargs_calls | ({call} if has_splat else set())
    leading = 2 if resolved.api is CheckpointApi.CHECKPOINT_SEQUENTIAL else 1
    star_args_at = next((i for i, a in enumerate(all_positional) if a.star == "*"), None)
    if resolved.api is CheckpointApi.CHECKPOINT_SEQUENTIAL:
        # checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
        # the flag may be passed positionally, or hidden in a `*args` splat.
        if star_args_at is not None and star_args_at <= 3:
            star_calls = star_calls | {call}
        elif len(all_positional) >= 4:
            flag = all_positional[3]
            all_keywords["use_reentrant"] = KeywordValue("use_reentrant", flag.value, call)
    function = all_positional[0].value if all_positional and star_args_at != 0 else None
    chain = resolved.chain + ((call,) if kind is SiteKind.CALL else ())
    return CheckpointSite(
        node=call,
        kind=kind,
        api=resolved.api,
        keywords=all_keywords,
        has_star_kwargs=bool(star_calls),
        positional=all_positional[leading:],
        function=function,
        via_partial=resolved.partial if kind is SiteKind.CALL else None,
        call_chain=chain,
        star_kwargs_calls=frozenset(star_calls),
        imported_partial=resolved.imported_partial,
    )


def checkpointed_segments(values: frozenset, call: cst.Call) -> frozenset:
    """`checkpoint_sequential(functions, segments, x)` checkpoints all but the last segment
    (torch runs that one plainly): with `functions` an `nn.Sequential` or a list whose members
    are known in order and `segments` a literal, what it recomputes is the members of the
    checkpointed segments only; members whose order is not known (`self.children()` of
    children added under computed names) are all taken."""
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    segments = positional[1].value if len(positional) > 1 else next(
        (arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "segments"), None
    )
    if len(values) != 1 or not isinstance(segments, cst.Integer):
        return values
    (value,) = values
    if isinstance(value, model_values.Instance) and value.members is not None and value.ordered:
        members: tuple[frozenset, ...] | None = value.members
    elif isinstance(value, model_values.Sequence) and value.items is not None:
        members = value.items
    else:
        return values
    count = int(segments.evaluated_value)
    if count < 1:
        return values
    checkpointed = members[: (len(members) // count) * (count - 1)]
    return frozenset({model_values.Sequence(checkpointed, frozenset().union(*checkpointed))})


def _is_dict_call(expr: cst.BaseExpression) -> bool:
    """`dict(use_reentrant=False, preserve_rng_state=False)`: keywords only (no positional
    argument, no `**` splat), so its keys are known."""
    return (
        isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "dict"
        and bool(expr.args) and not any(arg.keyword is None or arg.star for arg in expr.args)
    )
