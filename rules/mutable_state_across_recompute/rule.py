from __future__ import annotations

from collections.abc import Callable
from functools import cache

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import SITE_REQUIRES, SITE_TRIGGERS, CheckpointSite, SiteKind
from ckptlint.analysis.model_expressions import written_name
from ckptlint.analysis.region_paths import forward_regions, region_randomness, region_running_stats
from ckptlint.analysis.regions import is_backward_call
from ckptlint.analysis.site_scopes import SiteScopes
from ckptlint.model.recompute_reads import RecomputeReads, recompute_reads
from ckptlint.model.form.values import Instance, Mapping, Sequence
from ckptlint.types import Severity

from .changes import Mutation, apart, attribute_changes, container_names, mode_switch, mutations_in, walk_statements
from .region_names import names_read, own_names, self_reads
from .watches import Watch, watches

# A function that trains: backward runs in it, or (Lightning) after it returns.
TRAINING_WORDS = (".backward(", "manual_backward", "training_step")
_SITE_REQUIRES, _SITE_TRIGGERS = (tuple(w.decode() for w in words) for words in (SITE_REQUIRES, SITE_TRIGGERS))


class MutableStateAcrossRecompute(SiteScopes):
    """A non-tensor value the checkpointed region reads is changed before backward.

    ## What it does
    Finds, in the function that calls `checkpoint`, a change made *after* the call to a
    value the region reads that is not a tensor:

    - a dict, list or set passed as a checkpoint argument, or captured by the checkpointed
      lambda / nested function, and then mutated (`state["k"] = v`, `cache.append(...)`,
      `cfg.update(...)`);
    - a `self.<attribute>` that the checkpointed callable reads (a lambda, a nested function,
      or `self.<method>`), reassigned later in the same function.

    A change in another branch of the `if` that holds the checkpoint (`if ...: checkpoint(...)`
    then `elif self.training: feats["coords"] = ...`) never runs with it: not reported.

    Across functions and files, through the project model: a training function (one that
    runs `backward()`, or a Lightning `training_step`) that calls a module, then changes
    what the regions its `forward` checkpoints read before backward runs: a dict or list it
    passed for a `forward` parameter the region gets (`net(x, opts)`, then `opts["t"] =
    0.5`), or an attribute the checkpointed code reads (`net.blk.use_gelu = False`, where
    `forward` checkpoints `self.blk`). That finding is at the change, and names the
    checkpoint call. Likewise the module put in eval mode between its forward and backward
    (`model.eval()`, `model.train(False)`, also on a module holding it, not followed by
    `model.train()` before backward) where its checkpointed regions run dropout or
    BatchNorm: reported at the mode switch.

    The message names the mutation.

    ## Why is this bad?
    checkpoint saves the tensors it is given, not the Python objects: the recomputation in
    backward runs the region again with whatever those objects hold *then*. A flag flipped or
    a dict updated after the call makes the recomputed forward take another branch or another
    module, and the gradients no longer match the loss that was computed. Nothing raises when
    the recomputed tensors have the same shapes: even the non-reentrant implementation's
    metadata check passes.

    ## Example
    ```python
    def forward(self, x):
        cfg = {"act": "gelu"}
        y = checkpoint(self.block, x, cfg, use_reentrant=False)
        cfg["act"] = "relu"  # the recomputation runs relu
        return y
    ```

    ## Use instead
    Pass the value itself (or a copy) and leave it alone until backward has run:
    ```python
    y = checkpoint(self.block, x, dict(cfg), use_reentrant=False)
    ```

    Not reported: containers created afresh for each call and not changed after it, tensors
    (their in-place changes are caught by autograd's version counters), immutable values,
    changes made before the call. No fix: where the value should be frozen is a design
    decision.

    ## Evidence
    torch 2.13 (CPU): a region `tanh(t) if cfg["act"] == "tanh" else sigmoid(t)` checkpointed
    with `cfg = {"act": "tanh"}`, then `cfg["act"] = "sigmoid"` before backward: the input's
    gradient differs from the unchecked run by up to 0.51 (non-reentrant) and 0.65
    (reentrant), with no error or warning. A Python number read by the region
    (`t * cfg["scale"]`) is a different case: the non-reentrant implementation keeps the
    original graph's non-tensor attributes and only recomputes saved tensors, so only the
    reentrant implementation picks the new value up there. `model.eval()` between the
    forward and backward of a checkpointed `Linear -> Dropout(0.3)` (or `Linear ->
    BatchNorm1d`) region: non-reentrant raises `CheckpointError: torch.utils.checkpoint: A
    different number of tensors was saved during the original forward and recomputation.`
    (BatchNorm: `Recomputed values for the following tensors have different metadata than
    during the forward pass.`); reentrant runs without error and returns the gradients of
    the eval-mode network. `tests/test_closure_rules.py` re-measures all of these.
    """

    code = "CKPT031"
    severity = Severity.ERROR
    name = "mutable-state-across-recompute"
    message = "a value the checkpointed region reads is changed after the checkpoint call"
    triggers = (*SITE_TRIGGERS, *(word.encode() for word in TRAINING_WORDS))
    reached_through_aliases = True  # torch's checkpoint under another module's name
    uses_project = True  # the modules a training function calls, and what their regions read
    words_in_code_only = True  # sites, and training functions the code writes

    @classmethod
    def may_apply_to(cls, text: str) -> bool:
        return _names_checkpoint(text) or any(word in text for word in TRAINING_WORDS)

    @classmethod
    def may_apply_to_project(cls, project, relative_path, settings, text) -> bool:
        if _names_checkpoint(text) or project.imports_checkpoint_alias(relative_path):
            return True
        # A training function: the file defines or imports a module whose regions read
        # something its caller can change.
        recomputing = project.recomputing_paths
        facts = project.files.get(relative_path)
        return relative_path in recomputing or (facts is not None and any(
            project.path_of(f"{absolute}.x") in recomputing or project.path_of(absolute) in recomputing
            for _, absolute in facts.names
        ))

    def __init__(self, context) -> None:
        super().__init__(context)
        self._functions: list[cst.FunctionDef] = []
        self._site_function: dict[cst.Call, cst.FunctionDef] = {}
        self._classes: list[cst.ClassDef] = []
        self._site_class: dict[cst.Call, cst.ClassDef] = {}
        # The functions (None: the top level) that call backward somewhere inside them: the
        # only ones `_changes_after_module_calls` walks, besides Lightning's `training_step`.
        self._calling_backward: set[cst.FunctionDef | None] = set()

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        super().visit_ClassDef(node)
        self._classes.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()
        super().leave_ClassDef(original_node)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        super().visit_FunctionDef(node)
        self._functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._changes_after_module_calls(original_node)
        self._functions.pop()
        super().leave_FunctionDef(original_node)

    def visit_Call(self, node: cst.Call) -> None:
        super().visit_Call(node)
        if self._functions:
            self._site_function[node] = self._functions[-1]
        if self._classes:
            self._site_class[node] = self._classes[-1]
        if is_backward_call(node):
            self._calling_backward.add(self._functions[-1] if self._functions else None)

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        function = self._site_function.get(site.node)
        if site.kind is not SiteKind.CALL or function is None:
            return
        containers = container_names(function)
        # Config objects handed to the region: any attribute written on them afterwards.
        objects = {
            arg.value.value for arg in site.positional
            if isinstance(arg.value, cst.Name) and self._is_plain_object(site.node, arg.value)
        }
        read = self._region_reads(site, function) & (containers | {n for n in self_reads(site, self._region(site))})
        if not read and not objects:
            return
        call_end = self.context.position(site.node).end
        changes = mutations_in(function, containers) + [
            change for change in attribute_changes(list(walk_statements(function)))
            if change.how == "reassigned" and change.target.split(".", 1)[0] in objects
        ]
        for mutation in changes:
            position = self.context.position(mutation.node).start
            handed = mutation.target in read or mutation.target.split(".", 1)[0] in objects
            if (
                handed and (position.line, position.column) > (call_end.line, call_end.column)
                and not apart(function, site.node, mutation.node)
            ):
                self.report(
                    site.node,
                    f"`{mutation.target}`, which the checkpointed region reads, is {mutation.how} after this call "
                    f"(line {position.line}): the recomputation in backward sees the changed value, so gradients "
                    "silently differ from the forward pass; pass a copy, or change it only after backward",
                )
                return

    # --- across functions: a module called, then what its regions read changed ---------------

    def leave_Module(self, original_node: cst.Module) -> None:
        self._changes_after_module_calls(original_node)  # a training script without functions

    def _changes_after_module_calls(self, function: cst.FunctionDef | cst.Module) -> None:
        """In a training function (or a script's top level): a module called (`net(x, opts)`,
        `self.model(batch)`), then, before backward, a change to what the regions its
        `forward` checkpoints read."""
        # Lightning runs backward after `training_step` returns.
        after_return = isinstance(function, cst.FunctionDef) and function.name.value == "training_step"
        if not after_return and (function if isinstance(function, cst.FunctionDef) else None) not in self._calling_backward:
            return  # no backward call in its own body (nested code counts for it too: a superset)
        nodes = list(walk_statements(function))
        calls = [node for node in nodes if isinstance(node, cst.Call)]
        backward_calls = [c for c in calls if is_backward_call(c)]
        if not backward_calls and not after_return:
            return
        # Positions only where needed: they cost a code generation of the whole file.
        backwards = cache(lambda: sorted(self._start(c) for c in backward_calls))
        self._mode_switches_before_backward(calls, backwards)
        containers = container_names(function)
        if not self.context.project.recomputing_paths:
            return  # no module's regions read anything a caller can change (`_reads_of_module`)
        changes = mutations_in(function, containers) + attribute_changes(nodes)
        if not changes:
            return
        starts = [(self._start(change.node), change) for change in changes]
        reported: set[cst.CSTNode] = set()
        for call in calls:
            if is_backward_call(call) or not isinstance(call.func, (cst.Name, cst.Attribute)):
                continue
            end = self.context.position(call).end
            later = [b for b in backwards() if b > (end.line, end.column)]
            if not later and not after_return:
                continue
            limit = later[0] if later else None
            between = [
                (start, change) for start, change in starts
                if start > (end.line, end.column) and (limit is None or start <= limit)
            ]
            if not between:
                continue  # nothing changes between this call and backward: what it is does not matter
            for reads in self._reads_of_module(call):
                watched = watches(
                    call, reads, lambda arg: self._is_container(call, arg, containers),
                    lambda arg: self._is_plain_object(call, arg),
                )
                for start, change in between:
                    if change.node in reported:
                        continue
                    watch = next((w for w in watched if w.matches(change)), None)
                    if watch is not None:
                        reported.add(change.node)
                        self._report_change(change, call, reads, watch, limit)

    def _mode_switches_before_backward(self, calls: list[cst.Call], backwards: Callable[[], list[tuple[int, int]]]) -> None:
        """A module called (`model(x)`), then put in eval mode (`model.eval()`, also on a module
        holding it) and not back in training mode before backward: its checkpointed regions
        that run dropout or BatchNorm recompute in another mode than their forward ran."""
        found_switches = [(c, found) for c in calls if (found := mode_switch(c)) is not None]
        if not any(training is False for _, (_, training) in found_switches):
            return
        switches = sorted(((self._start(c), c, found) for c, found in found_switches), key=lambda s: s[0])
        backwards = backwards()
        reported: set[cst.CSTNode] = set()
        for call in calls:
            called = written_name(call.func)
            end = self.context.position(call).end
            later = [b for b in backwards if b > (end.line, end.column)]
            if called is None or not later or mode_switch(call) is not None or is_backward_call(call):
                continue

            def covers(receiver: str) -> bool:
                return called == receiver or called.startswith(f"{receiver}.")

            mine = [(start, node, training) for start, node, (receiver, training) in switches
                    if (end.line, end.column) < start < later[0] and covers(receiver)]
            if not mine or mine[-1][2] or mine[-1][1] in reported:
                continue  # back in training mode before backward
            switch = next(node for _, node, training in mine if not training)
            paths = self._mode_dependent_paths(call)
            if paths:
                reported.add(mine[-1][1])
                line, region, what = paths[0]
                self.report(
                    switch,
                    f"`{cst.Module([]).code_for_node(switch)}` puts the module in eval mode after `{called}(...)` "
                    f"(line {self._start(call)[0]}) and before backward (line {later[0][0]}), but the region "
                    f"`{region}` checkpoints ({line}) runs {what}: the recomputation in backward runs it in eval "
                    "mode, so the non-reentrant implementation raises `CheckpointError` (it saves other tensors "
                    "than the forward did) and the reentrant one silently computes the gradients of another "
                    "network; switch modes only after backward",
                )

    def _mode_dependent_paths(self, call: cst.Call) -> list[tuple[str, str, str]]:
        """(file:line of the checkpoint, `Owner.forward`, what it runs) for the regions of the
        called module that behave differently in eval mode: dropout, BatchNorm."""
        project = self.context.project
        _, values = self.values_at(call, call.func)
        found = []
        for cls in sorted({value.cls for value in values if isinstance(value, Instance)}):
            path = project.path_of(f"{cls}.forward") or project.path_of(cls) or "?"
            for line, region in forward_regions(project, cls):
                for label, paths in (("dropout", region_randomness(region, project, mode_dependent=True)),
                                     ("BatchNorm", region_running_stats(region, project))):
                    if paths:
                        found.append((f"{path}:{line}", f"{cls.rsplit('.', 1)[-1]}.forward", f"{label} ({paths[0]})"))
        return found

    def _is_container(self, call: cst.Call, arg: cst.BaseExpression, containers: set[str]) -> bool:
        """A dict, list or set: a name the function binds to one, or an attribute the
        project model says holds one (`self.opts = {"temperature": 1.0}`)."""
        if isinstance(arg, cst.Name):
            return arg.value in containers
        if not isinstance(arg, cst.Attribute):
            return False
        _, values = self.values_at(call, arg)
        return bool(values) and all(isinstance(value, (Mapping, Sequence)) for value in values)

    def _is_plain_object(self, call: cst.Call, arg: cst.BaseExpression) -> bool:
        """An instance of a project class that is no module (a dataclass config): its
        attributes are Python values the region reads."""
        if not isinstance(arg, (cst.Name, cst.Attribute)):
            return False
        _, values = self.values_at(call, arg)
        project = self.context.project
        return bool(values) and all(
            isinstance(value, Instance) and project.class_named(value.cls) is not None
            and not any(base.rsplit(".", 1)[-1].endswith("Module") or base.startswith("torch.")
                        for base in project.ancestors(value.cls))
            for value in values
        )

    def _reads_of_module(self, call: cst.Call) -> list[RecomputeReads]:
        _, values = self.values_at(call, call.func)
        classes = sorted({value.cls for value in values if isinstance(value, Instance)})
        found = [recompute_reads(self.context.project, cls) for cls in classes]
        return [reads for reads in found if reads is not None]

    def _report_change(self, change: Mutation, call: cst.Call, reads: RecomputeReads, watch: Watch, limit) -> None:
        called = cst.Module([]).code_for_node(call.func)
        owner = reads.forward.rsplit(".", 2)[-2]
        backward = f"backward (line {limit[0]})" if limit is not None else "backward (Lightning runs it after `training_step` returns)"
        self.report(
            change.node,
            f"{change.written or f'`{change.target}`'} is {change.how} after `{called}(...)` (line {self._start(call)[0]}) and before "
            f"{backward}, but {watch.what} is read by the region `{owner}.forward` checkpoints ({reads.path}:{watch.line}): "
            "the recomputation in backward sees the changed value, so gradients silently differ from the forward "
            "pass; change it only after backward",
        )

    def _start(self, node: cst.CSTNode) -> tuple[int, int]:
        start = self.context.position(node).start
        return start.line, start.column

    def _region(self, site: CheckpointSite) -> cst.CSTNode | None:
        """The code the callable runs, when it is written here: a lambda, a nested function
        (by name, in the same function), or `self.<method>` of the enclosing class."""
        function = site.function
        if isinstance(function, cst.Lambda):
            return function
        if isinstance(function, cst.Name):
            enclosing = self._site_function.get(site.node)
            nested = [
                s for s in walk_statements(enclosing) if isinstance(s, cst.FunctionDef) and s.name.value == function.value
            ] if enclosing is not None else []
            return nested[0] if len(nested) == 1 else None
        if (
            isinstance(function, cst.Attribute)
            and isinstance(function.value, cst.Name)
            and function.value.value == "self"
            and site.node in self._site_class
        ):
            methods = [
                s for s in self._site_class[site.node].body.body
                if isinstance(s, cst.FunctionDef) and s.name.value == function.attr.value
            ]
            return methods[0] if len(methods) == 1 else None
        return None

    def _region_reads(self, site: CheckpointSite, function: cst.FunctionDef) -> set[str]:
        """Names passed as checkpoint arguments, names the callable captures, and the
        `self.<attr>` it reads."""
        names = {arg.value.value for arg in site.positional if isinstance(arg.value, cst.Name)}
        region = self._region(site)
        if region is not None:
            if not isinstance(site.function, cst.Attribute):  # a method closes over nothing of the caller's
                names |= names_read(region) - own_names(region)
            names |= self_reads(site, region)
        return names


def _names_checkpoint(text: str) -> bool:
    return all(word in text for word in _SITE_REQUIRES) and any(word in text for word in _SITE_TRIGGERS)
