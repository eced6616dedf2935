"""CKPT032's checks of calls through helpers that hand their `**kwargs` on to torch's
`checkpoint` (`forwarding_helpers.py`): a helper of the file, found with libcst, or one of
another module or a decorated function, found by the project index
(`ckptlint.model.forwarding`). Mixed into the rule: the methods read what its traversal
recorded (`SiteScopes`: `_calls`, `_call_scopes`, `_owner`; the rule's `_function_of`)."""

from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.model.library.torch import Reentrancy
from ckptlint.versions import Applies, VersionRange

from .forwarding_helpers import ForwardingHelper, forwarded_keywords, forwarding_helper, helper_called, passes_reentrant

# torch before `use_reentrant` (1.4 to 1.10, `torch/utils/checkpoint.py`): `preserve =
# kwargs.pop('preserve_rng_state', True); if kwargs: raise ValueError("Unexpected keyword
# arguments: " + ",".join(arg for arg in kwargs))`, the reentrant `CheckpointFunction` always.
TORCH_WITHOUT_THE_FLAG = VersionRange.of("torch", max="1.11")


class ForwardingHelperCalls:
    """Keywords for the checkpointed function passed through a forwarding helper."""

    def _check_forwarding_helpers(self) -> None:
        """A helper of the file that hands its `**kwargs` to `checkpoint` without
        `use_reentrant`, called with keywords for the checkpointed function: they reach the
        reentrant implementation (`forwarding_helpers.py`)."""
        helpers: dict[tuple[str | None, str], ForwardingHelper] = {}
        for site in self.context.sites:
            scopes = self._call_scopes.get(site.node, ())
            function = self._function_of.get(site.node)
            is_method = len(scopes) >= 2 and scopes[-2][0] == "class" and function is not None
            owner = self._owner(scopes) if is_method else None
            helper = forwarding_helper(site, function, owner)
            if helper is not None:
                helpers[(owner, helper.name)] = helper
        if self.context.versions.applies((TORCH_WITHOUT_THE_FLAG,)) is Applies.YES:
            return
        reported = self._check_indexed_helpers()
        for call in self._calls if helpers else ():
            if call in reported:
                continue
            helper = helper_called(call, helpers, self._owner(self._call_scopes.get(call, ())))
            forwarded = helper.forwarded(call) if helper is not None and call is not helper.site.node else None
            if not forwarded:
                continue
            names = ", ".join(f"`{k}`" for k in forwarded)
            how = (
                "with the `use_reentrant=True` this call passes" if passes_reentrant(call)
                else "with `use_reentrant=True`" if helper.site.reentrancy is Reentrancy.EXPLICIT_TRUE
                else "without `use_reentrant`, so torch defaults to reentrant"
            )
            self.report(
                call,
                f"keyword argument{'s' if len(forwarded) > 1 else ''} {names} passed through `{helper.name}` "
                f"(line {self.context.position(helper.function).start.line}), which hands its `**kwargs` to "
                f"`checkpoint` (line {self.context.position(helper.site.node).start.line}) {how}: torch raises "
                f"`ValueError: Unexpected keyword arguments: {','.join(forwarded)}` whenever checkpointing is on; "
                "pass `use_reentrant=False` in that call",
            )

    def _check_indexed_helpers(self) -> set[cst.Call]:
        """Calls of a helper of another module that hands its `**kwargs` to `checkpoint`
        without `use_reentrant`, or of a function (of any module) decorated by a decorator
        whose wrapper does, with keywords meant for the checkpointed function (the project
        index: `ckptlint.model.forwarding`)."""
        project = self.context.project
        if not project.forwarding:
            return set()
        facts = project.files.get(self.context.relative_path)
        names = dict(facts.names) if facts is not None else {}
        reported: set[cst.Call] = set()
        words = project.forwarding_words
        for call in self._calls:
            called = call.func.value if isinstance(call.func, cst.Name) else (
                call.func.attr.value if isinstance(call.func, cst.Attribute) else None
            )
            if called not in words or not any(arg.keyword is not None for arg in call.args):
                continue
            target = self._indexed_target(call, names)
            if target is None:
                continue
            helper, decorated = target
            path = project.path_of(helper.name)
            if decorated is None and path == self.context.relative_path:
                continue  # a helper of this file: `_check_forwarding_helpers` reports it
            forwarded = forwarded_keywords(call, helper.accepted)
            if not forwarded:
                continue
            where = f"{path}, " if path is not None and path != self.context.relative_path else ""
            helper_name = helper.name.rsplit(".", 1)[-1]
            if decorated is None:
                through = f"`{helper_name}` ({where}line {helper.line}), which hands its `**kwargs`"
            else:
                decorated_path = project.path_of(decorated.name)
                decorated_where = (
                    f"{decorated_path}, " if decorated_path is not None and decorated_path != self.context.relative_path else ""
                )
                through = (
                    f"`{decorated.name.rsplit('.', 1)[-1]}` ({decorated_where}line {decorated.line}), decorated by "
                    f"`@{helper_name}` ({where}line {helper.line}), whose wrapper hands its `**kwargs`"
                )
            names_shown = ", ".join(f"`{k}`" for k in forwarded)
            self.report(
                call,
                f"keyword argument{'s' if len(forwarded) > 1 else ''} {names_shown} passed through {through} to "
                f"`checkpoint` (line {helper.checkpoint_line}{' of that file' if where else ''}) "
                + ("with the `use_reentrant=True` this call passes" if passes_reentrant(call)
                   else "reentrant (`use_reentrant` is not set to False there)")
                + ": "
                f"torch raises `ValueError: Unexpected keyword arguments: {','.join(forwarded)}` whenever checkpointing "
                "is on; pass `use_reentrant=False` in that call",
            )
            reported.add(call)
        return reported

    def _indexed_target(self, call: cst.Call, names: dict[str, str]):
        """What the index says a call calls: an imported (or the file's own) function by
        name, or `self.<method>` of the class holding the call or of a project base."""
        project = self.context.project
        func = call.func
        if isinstance(func, cst.Name):
            absolute = names.get(func.value)
            return project.forwarding_target(absolute) if absolute is not None else None
        if isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self":
            owner = self._owner(self._call_scopes.get(call, ()))
            for ancestor in project.ancestors(owner) if owner is not None else ():
                found = project.forwarding_target(f"{ancestor}.{func.attr.value}")
                if found is not None:
                    return found
        return None
