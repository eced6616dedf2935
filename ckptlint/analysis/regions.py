"""What a checkpoint recomputes: from a checkpoint site to the modules and functions its
region runs, through the project model (`ckptlint.model.evaluation.denotation`), across files:

    checkpoint(self.block, x)                  the module `self.block` holds, however it was
                                               built (a constructor default, `add_module`, a
                                               builder function, a class passed in)
    checkpoint(self._forward, x)               that method, and what it calls
    def _inner_forward(x): ...                 a function nested in `forward` (closing over
    cp.checkpoint(_inner_forward, x)           `self`), and what it calls
    checkpoint(create_custom_forward(layer))   the function a factory returns, with its closure
    checkpoint(lambda t: self.block(t), x)     what the lambda calls
    for blk in self.blocks: checkpoint(blk, x) each module of `self.blocks`
    checkpoint_sequential(self.seq, n, x)      the members of the first n - 1 segments (torch
                                               runs the last one plainly)
    checkpoint_seq([self.a, self.b], x)        a project's own checkpoint helper's argument

A region the model cannot resolve is not reported.
"""

from __future__ import annotations

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import SITE_REQUIRES, SITE_TRIGGERS, CheckpointApi, CheckpointSite, SiteKind, checkpointed_segments
from ckptlint.analysis.cst_walk import walk
from ckptlint.analysis.fsdp import absolute_names
from ckptlint.analysis.region_paths import Region, wrapped_class_region
from ckptlint.analysis.site_scopes import SiteScopes, class_refs
from ckptlint.model.form.values import Arguments, ClassRef, Instance
from ckptlint.model.index import ProjectIndex
from ckptlint.model.library.combined import BACKWARD_METHODS, LIBRARY_CHECKPOINTING_HELPERS
from ckptlint.model.library.torch import APPLY_ACTIVATION_CHECKPOINTING, CHECKPOINT_WRAPPER, COMPOSABLE_CHECKPOINT


def mentions_checkpointing(project: ProjectIndex, relative_path: str, settings, text: str) -> bool:
    """Whether a file can run something checkpointed: it names torch's checkpoint, wraps
    classes for checkpointing, or calls one of the project's own checkpoint wrappers (or a
    configured `checkpoint-functions` entry)."""
    if any(w.decode() in text for w in SITE_TRIGGERS) and all(w.decode() in text for w in SITE_REQUIRES):
        return True
    if "checkpoint_wrapper(" in text or ("_composable" in text and "checkpoint(" in text):
        return True  # modules wrapped one by one
    facts = project.files.get(relative_path)
    if facts is not None and facts.wrapped_classes:
        return True
    names = (*project.checkpoint_wrappers, *settings.checkpoint_functions)
    if any(_calls(text, name.rsplit(".", 1)[-1]) for name in names):
        return True
    # A library's helper (timm's `checkpoint_seq`, DeepSpeed's `checkpoint`) is imported from
    # its package, which the file then names: `checkpoint(` alone is in every file that saves one.
    if any(_calls(text, name.rsplit(".", 1)[-1]) and name.split(".", 1)[0] in text for name in LIBRARY_CHECKPOINTING_HELPERS):
        return True
    return project.imports_checkpoint_alias(relative_path)  # `from .utils import checkpoint`


def _calls(text: str, name: str) -> bool:
    """Whether `text` writes `name(` with the whole name: `cp.checkpoint(`, not
    `load_checkpoint(` (a trainer calling DeepSpeed's `load_checkpoint` checkpoints nothing)."""
    written = f"{name}("
    at = text.find(written)
    while at != -1:
        if at == 0 or not (text[at - 1].isalnum() or text[at - 1] == "_"):
            return True
        at = text.find(written, at + 1)
    return False


class CheckpointingGate:
    """The gate of the rules about what runs checkpointed: torch's checkpoint named, or the
    project's own checkpoint wrappers, classes wrapped for checkpointing, `checkpoint-functions`."""

    triggers = (*SITE_TRIGGERS, b"checkpoint", b"ckpt")
    requires = ()
    uses_project = True
    reached_through_aliases = True
    # A site, a wrapper or a helper the code calls: a docstring naming them is none.
    words_in_code_only = True

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        return mentions_checkpointing(project, relative_path, settings, text)


class RegionRule(CheckpointingGate, SiteScopes):
    """Base of the rules about what a checkpoint site recomputes: resolves a site's region
    through the project model."""

    # --- resolving a region ------------------------------------------------------------------

    def site_region(self, site: CheckpointSite, assume: Arguments = ()) -> Region | None:
        """What the site recomputes (`assume`: the constructor arguments the instance
        holding it is taken to be built with, e.g. the `with_cp=True` its guard needs)."""
        if site.kind is not SiteKind.CALL:
            return None
        sequential = site.api is CheckpointApi.CHECKPOINT_SEQUENTIAL and site.via_partial is None
        return self._region_at(site.node, site.function, checkpointed_segments if sequential else None, assume)

    def _region_at(self, call: cst.Call, function: cst.BaseExpression | None, select=None, assume: Arguments = ()) -> Region | None:
        if function is None:
            return None
        owner, values = self.values_at(call, function, assume)
        values = self.not_ruled_out(call, function, values)
        if select is not None:
            values = select(values, call)
        runs = self.context.project.denotation.runs(values)
        if not runs:
            return None
        return Region(owner, self._region_label(call, function, owner), runs)

    def _region_label(self, call: cst.Call, function: cst.BaseExpression, owner: str | None) -> str | None:
        """`Stage.blocks` for `self.blocks` (or a loop variable over it), else the code; a
        generic parameter resolved at its call sites says where (`blocks (as passed at
        train.py:12)`)."""
        short = owner.rsplit(".", 1)[-1] if owner is not None else None
        node = function
        if isinstance(node, cst.Call) and _code(node.func).rsplit(".", 1)[-1] == "partial" and node.args:
            node = node.args[0].value  # `partial(blk, mask=mask)`
        if isinstance(node, cst.Name):
            node = self._call_loops.get(call, {}).get(node.value, node)
        while isinstance(node, cst.Subscript):
            node = node.value
        if isinstance(node, cst.Call) and isinstance(node.func, cst.Name) and node.func.value in ("list", "tuple") and node.args:
            node = node.args[0].value
        if isinstance(node, (cst.List, cst.Tuple)) and len(_code(node)) <= 60:
            return _code(node)
        if (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in ("children", "named_children", "modules", "values", "items")
        ):
            receiver = node.func.value
            if isinstance(receiver, cst.Name) and receiver.value == "self" and short:
                return f"{short}.{node.func.attr.value}()"
            node = receiver
        if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self" and short:
            return f"{short}.{node.attr.value}"
        if isinstance(node, (cst.Name, cst.Attribute)):
            return _code(node) + self._passed_at(call, node)
        return None

    def _passed_at(self, call: cst.Call, node: cst.BaseExpression, holds=None) -> str:
        """Where the project passes the parameter `node` starts with, when the model
        resolved it at the enclosing function's call sites (with `holds`, the sites whose
        values it accepts)."""
        while isinstance(node, cst.Attribute):
            node = node.value
        scopes = self._call_scopes.get(call, ())
        if not isinstance(node, cst.Name) or not scopes or scopes[-1][0] != "function":
            return ""
        denotation = self.context.project.denotation
        function = ".".join([self._module, *(name for _, name in scopes)])
        sites = [site for site in denotation.passed_through(function, holds) if site[0] == node.value]
        if not sites:
            return ""
        more = f" and {len(sites) - 1} more call site{'s' if len(sites) > 2 else ''}" if len(sites) > 1 else ""
        chain = [f"{sites[0][1]}:{sites[0][2]}"]
        caller = sites[0][3]
        while len(chain) < 4:  # the caller's own parameter, resolved at its call sites in turn
            further = denotation.passed_through(caller)
            if not further:
                break
            chain.append(f"{further[0][1]}:{further[0][2]}")
            caller = further[0][3]
        return f" (as passed at {' <- '.join(chain)}{more})"

    # --- the rules' hooks --------------------------------------------------------------------

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        if site.kind is SiteKind.CALL and self.guard_never_holds(site.node):
            return
        region = self.site_region(site)
        if region is not None:
            self.check_region(site.node, region, site.api.short_name)

    def check_region(self, node: cst.Call, region: Region, api: str) -> None:
        """Report what the rule finds in `region`, checkpointed by `node` (`api` names it)."""

    def check_wrapped(self, node: cst.Call, region: Region, what: str, api: str) -> None:
        """Report what the rule finds in modules `node` wraps (`checkpoint_wrapper(block)`,
        the composable `checkpoint(block)`, `apply_activation_checkpointing(check_fn=...)`):
        `what` names them; by default their forward is checked as a region."""
        self.check_region(node, region, api)

    def finish(self) -> None:
        project = self.context.project
        configured = set(self.context.settings.checkpoint_functions)
        wrapped_here: set[int] = set()
        for call in self._calls:
            names = self._own_method(call) or absolute_names(self.context, call.func)
            if names and (names <= CHECKPOINT_WRAPPER or names <= COMPOSABLE_CHECKPOINT):
                # A module wrapped by itself: `checkpoint_wrapper(block)`, the composable
                # `checkpoint(block)`, whatever `block` denotes (a loop variable over
                # `model.blocks`, a generic parameter resolved at its call sites).
                module = next((arg.value for arg in call.args if arg.keyword is None and not arg.star), None)
                region = self._region_at(call, module, _as_instances) if module is not None else None
                if region is not None and any(isinstance(v, Instance) for v in region.runs):
                    wrapped_here.add(self.context.position(call).start.line)
                    self.check_wrapped(call, region, _wrapped_name(region), _code(call.func).rsplit(".", 1)[-1])
                continue
            # A call of the project's own checkpoint wrapper (timm's `checkpoint_seq`-style), or
            # of a library's (timm's `checkpoint_seq` itself).
            positions = {self._checkpointed_position(n, call, configured) for n in names}
            if len(positions) != 1 or None in positions:
                continue
            positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
            position = positions.pop()
            if position < len(positional):
                region = self._region_at(call, positional[position].value)
                if region is not None:
                    self.check_region(call, region, _code(call.func))
        # Classes this file wraps with checkpoint_wrapper / apply_activation_checkpointing.
        facts = project.files.get(self.context.relative_path)
        checked: set[tuple[int, str]] = set()
        for wrapped in facts.wrapped_classes if facts is not None else ():
            if wrapped.api == "checkpoint_wrapper" and wrapped.line in wrapped_here:
                continue
            node = next(
                (c for c in self._calls if self.context.position(c).start.line == wrapped.line
                 and _code(c.func).rsplit(".", 1)[-1] in (wrapped.api, "checkpoint_wrapper", "apply_activation_checkpointing")),
                None,
            )
            region = wrapped_class_region(project, wrapped.name)
            if node is not None and region is not None and (wrapped.line, region.owner) not in checked:
                checked.add((wrapped.line, region.owner))
                self.check_wrapped(node, region, region.owner.rsplit(".", 1)[-1], wrapped.api)
        # `check_fn=lambda m: isinstance(m, layer_cls)` in a helper that takes the class as
        # a parameter: the classes the project's calls of the helper pass.
        for call in self._calls:
            if not absolute_names(self.context, call.func) & APPLY_ACTIVATION_CHECKPOINTING:
                continue
            line = self.context.position(call).start.line
            for class_name, passed in self._check_fn_classes(call):
                region = wrapped_class_region(project, class_name)
                if region is not None and (line, region.owner) not in checked:
                    checked.add((line, region.owner))
                    self.check_wrapped(call, region, region.owner.rsplit(".", 1)[-1] + passed, "apply_activation_checkpointing")

    def _checkpointed_position(self, name: str, call: cst.Call, configured: set[str]) -> int | None:
        """The position of the argument a call of `name` runs under checkpoint, when `name` is a
        configured `checkpoint-functions` entry, a library's checkpointing helper (not when a
        keyword leaves a member out: `checkpoint_seq(blocks, x, skip_last=flag)`) or the
        project's own."""
        if name in configured:
            return 0
        helper = LIBRARY_CHECKPOINTING_HELPERS.get(name)
        if helper is None:
            return self.context.project.checkpointed_parameter(name)
        if helper.leaves_out is not None:
            keyword, position = helper.leaves_out
            positional = [a.value for a in call.args if a.keyword is None and not a.star]
            given = [a.value for a in call.args if a.keyword is not None and a.keyword.value == keyword]
            given += positional[position:position + 1]
            if any(a.star for a in call.args) or any(not (isinstance(v, cst.Name) and v.value == "False") for v in given):
                return None
        return helper.parameter

    def _check_fn_classes(self, call: cst.Call) -> list[tuple[str, str]]:
        """The classes `check_fn`'s `isinstance` tests name, as the model evaluates them at
        `call` (a lambda written there or bound to a name in the same function), each with
        where the project passes it when it is a parameter (` (as passed at train.py:6)`)."""
        check_fn = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == "check_fn"), None)
        if isinstance(check_fn, cst.Name):
            check_fn = self._assigned_lambdas.get(check_fn.value)
        if not isinstance(check_fn, cst.Lambda):
            return []
        found: list[tuple[str, str]] = []
        for tested in _isinstance_classes(check_fn.body):
            _, values = self.values_at(call, tested)
            names = sorted({e.name for v in values for e in class_refs(v)})
            for name in names:
                passed = ""
                if isinstance(tested, cst.Name):
                    passed = self._passed_at(call, tested, lambda passed, name=name: any(e.name == name for v in passed for e in class_refs(v)))
                found.append((name, passed))
        return found



def _isinstance_classes(expr: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The second arguments of the `isinstance(x, C)` calls in `expr`."""
    found: list[cst.BaseExpression] = []

    class _Visitor(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if isinstance(node.func, cst.Name) and node.func.value == "isinstance" and len(node.args) == 2:
                found.append(node.args[1].value)

    walk(expr, _Visitor())
    return found


def _wrapped_name(region: Region) -> str:
    """How a message names the modules one wrapper call wraps: the class, or the code."""
    classes = sorted({v.cls.rsplit(".", 1)[-1] for v in region.runs if isinstance(v, Instance)})
    return classes[0] if len(classes) == 1 else region.label or " / ".join(classes)


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _as_instances(values: frozenset, call: cst.Call) -> frozenset:
    """What a module argument holds: a class where the model has one (a parameter annotated
    `block: VisionBlock` that nothing passes) stands for an instance of it."""
    return frozenset(
        Instance(value.name, value.bound, generic=True) if isinstance(value, ClassRef) else value for value in values
    )


def is_backward_call(call: cst.Call) -> bool:
    """`loss.backward()`, `self.manual_backward(loss)`, `accelerator.backward(loss)`."""
    return isinstance(call.func, cst.Attribute) and call.func.attr.value in BACKWARD_METHODS
