from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.checkpoint_sites import SITE_REQUIRES, SITE_TRIGGERS, CheckpointSite, SiteKind
from ckptlint.analysis.cst_walk import child_nodes, descendants, walk
from ckptlint.analysis.cst_code import dotted_text
from ckptlint.analysis.region_paths import forward_regions, region_randomness, region_running_stats
from ckptlint.analysis.regions import is_backward_call
from ckptlint.analysis.site_scopes import SiteScopes
from ckptlint.model.recompute_reads import RecomputeReads, recompute_reads
from ckptlint.model.form.values import Instance, Mapping, Sequence
from ckptlint.rule import Invalid, Valid

# Methods only containers have (tensors have none of them): a call of one mutates the object.
MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add", "discard", "remove"}
)
CONTAINER_CONSTRUCTORS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "deque"})
# A function that trains: backward runs in it, or (Lightning) after it returns.
TRAINING_WORDS = (".backward(", "manual_backward", "training_step")
_SITE_REQUIRES, _SITE_TRIGGERS = (tuple(w.decode() for w in words) for words in (SITE_REQUIRES, SITE_TRIGGERS))


@dataclass(frozen=True)
class _Mutation:
    target: str  # `state`, or `self.flag`; `net.layers[*].flag` for `layer.flag` in `for layer in net.layers`
    node: cst.CSTNode
    how: str
    written: str = ""  # for the message, where the target is not what the code says (`layer.flag`)


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
        containers = _containers(function)
        # Config objects handed to the region: any attribute written on them afterwards.
        objects = {
            arg.value.value for arg in site.positional
            if isinstance(arg.value, cst.Name) and self._is_plain_object(site.node, arg.value)
        }
        read = self._region_reads(site, function) & (containers | {n for n in _self_reads(site, self._region(site))})
        if not read and not objects:
            return
        call_end = self.context.position(site.node).end
        changes = _mutations(function, containers) + [
            change for change in _attribute_changes(list(_walk_statements(function)))
            if change.how == "reassigned" and change.target.split(".", 1)[0] in objects
        ]
        for mutation in changes:
            position = self.context.position(mutation.node).start
            handed = mutation.target in read or mutation.target.split(".", 1)[0] in objects
            if (
                handed and (position.line, position.column) > (call_end.line, call_end.column)
                and not _apart(function, site.node, mutation.node)
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
        nodes = list(_walk_statements(function))
        calls = [node for node in nodes if isinstance(node, cst.Call)]
        backward_calls = [c for c in calls if is_backward_call(c)]
        if not backward_calls and not after_return:
            return
        # Positions only where needed: they cost a code generation of the whole file.
        backwards = cache(lambda: sorted(self._start(c) for c in backward_calls))
        self._mode_switches_before_backward(calls, backwards)
        containers = _containers(function)
        if not self.context.project.recomputing_paths:
            return  # no module's regions read anything a caller can change (`_reads_of_module`)
        changes = _mutations(function, containers) + _attribute_changes(nodes)
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
                watched = _watched(
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
        found_switches = [(c, found) for c in calls if (found := _mode_switch(c)) is not None]
        if not any(training is False for _, (_, training) in found_switches):
            return
        switches = sorted(((self._start(c), c, found) for c, found in found_switches), key=lambda s: s[0])
        backwards = backwards()
        reported: set[cst.CSTNode] = set()
        for call in calls:
            called = dotted_text(call.func)
            end = self.context.position(call).end
            later = [b for b in backwards if b > (end.line, end.column)]
            if called is None or not later or _mode_switch(call) is not None or is_backward_call(call):
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

    def _report_change(self, change: _Mutation, call: cst.Call, reads: RecomputeReads, watch: _Watch, limit) -> None:
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
                s for s in _walk_statements(enclosing) if isinstance(s, cst.FunctionDef) and s.name.value == function.value
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
                names |= _names_read(region) - _own_names(region)
            names |= _self_reads(site, region)
        return names

    valid = [
        # The change is in another branch of the `if` that checkpoints (boltz): never both.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Model(nn.Module):
                def __init__(self, cond):
                    super().__init__()
                    self.cond = cond
                    self.run_structure = True

                def forward(self, s, feats):
                    if self.run_structure:
                        out = checkpoint(self.cond, s, feats, use_reentrant=False)
                    elif self.training:
                        feats["coords"] = feats["coords"].squeeze(1)
                        out = s
                    return out
            """
        ),
        # A copy handed to a method: the method's own parameter of the same name is not the
        # caller's list.
        Valid(
            """
            import torch
            from torch.utils.checkpoint import checkpoint

            class Mixer(torch.nn.Module):
                def _mix(self, x, memory):
                    return x + torch.stack(memory).mean(0)

                def forward(self, chunks):
                    memory = [chunks[0]]
                    for c in chunks[1:]:
                        y = checkpoint(self._mix, c, list(memory), use_reentrant=False)
                        memory.append(y)
                    return y
            """
        ),
        # Across functions: the change comes after backward, or touches nothing the region reads.
        Valid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)
                    self.scale = 1.0

                def _scaled(self, x, opts):
                    return self.fc(x) * opts["t"] * self.scale

                def forward(self, x, opts, log):
                    return checkpoint(self._scaled, x, opts, use_reentrant=False)

            def train(loader):
                net, opts, log = Net(), {"t": 1.0}, {}
                for x in loader:
                    loss = net(x, opts, log).sum()
                    log["loss"] = loss.item()
                    net.name = "warm"
                    loss.backward()
                    opts["t"] *= 0.99
                    net.scale = 0.5
            """
        ),
        # Eval mode between forward and backward: restored before backward; another model
        # (a teacher); a module whose regions hold neither dropout nor BatchNorm.
        Valid(
            """
            import torch
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc, self.drop = nn.Linear(8, 8), nn.Dropout(0.1)

                def forward(self, x):
                    return self.drop(self.fc(x))

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head, self.proj = Head(), nn.Linear(8, 8)

                def _project(self, x):
                    return self.proj(x).relu()

                def forward(self, x, plain=False):
                    if plain:
                        return checkpoint(self._project, x, use_reentrant=False)
                    return checkpoint(self.head, x, use_reentrant=False)

            class Plain(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.proj = nn.Linear(8, 8)

                def forward(self, x):
                    return checkpoint(self.proj, x, use_reentrant=False)

            def train(loader, teacher):
                model, plain = Net(), Plain()
                for x in loader:
                    loss = model(x).sum() + plain(x).sum()
                    teacher.eval()
                    plain.eval()
                    model.eval()
                    with torch.no_grad():
                        shown = model(x)
                    model.train()
                    loss.backward()
            """
        ),
        # A fresh dict per call, never changed after it; a copy; a change before the call.
        Valid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, x):
                for block in self.blocks:
                    cfg = {"scale": block.scale}
                    x = checkpoint(block, x, cfg, use_reentrant=False)
                state = {"step": 0}
                state["step"] += 1
                y = checkpoint(self.head, x, dict(state), use_reentrant=False)
                state["step"] += 1
                return y
            """
        ),
        # Tensors changed in place are autograd's business, and an unrelated dict.
        Valid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, x, mask):
                stats = {}
                y = checkpoint(self.block, x, mask, use_reentrant=False)
                mask[0] = 0
                stats["norm"] = y.norm()
                return y
            """
        ),
    ]
    invalid = [
        # A dict parameter (indexed by string keys) updated after each checkpointed block.
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, x, ctx):
                for block in self.blocks:
                    x = checkpoint(block, x, ctx, use_reentrant=False)
                    ctx["layer_idx"] += 1
                return x
            """,
            line=5,
            column=13,
            message_contains="`ctx`, which the checkpointed region reads, is assigned an item after this call (line 6)",
        ),
        # A config object handed to the region, its attribute annealed after the forward
        # (at a script's top level).
        Invalid(
            """
            from dataclasses import dataclass
            import torch
            from torch.utils.checkpoint import checkpoint

            @dataclass
            class RunConfig:
                temperature: float = 1.0

            class Scorer(torch.nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = torch.nn.Linear(8, 8)

                def score(self, x, cfg):
                    return torch.tanh(self.fc(x) / cfg.temperature)

                def forward(self, x, cfg):
                    return checkpoint(self.score, x, cfg, use_reentrant=False)

            model, cfg = Scorer(), RunConfig()
            for x in loader:
                loss = model(x, cfg).sum()
                cfg.temperature *= 0.999
                loss.backward()
            """,
            line=23,
            column=5,
            message_contains="`cfg` is passed as `cfg`, which is read by the region `Scorer.forward` checkpoints",
        ),
        # Across functions: the training loop changes a flag of the checkpointed block
        # between the forward and backward (reported at the change).
        Invalid(
            """
            import torch.nn as nn
            import torch.nn.functional as F
            from torch.utils.checkpoint import checkpoint

            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc = nn.Linear(8, 8)
                    self.use_gelu = True

                def forward(self, x):
                    return F.gelu(self.fc(x)) if self.use_gelu else F.relu(self.fc(x))

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.block = Block()

                def forward(self, x):
                    return checkpoint(self.block, x, use_reentrant=False)

            def train(loader):
                net = Net()
                for step, x in enumerate(loader):
                    loss = net(x).sum()
                    net.block.use_gelu = step < 100
                    loss.backward()
            """,
            line=26,
            column=9,
            message_contains="`net.block.use_gelu` is reassigned after `net(...)` (line 25) and before backward (line 27)",
        ),
        # Eval mode on logging steps, between the forward and backward, restored only at the
        # next step: the checkpointed head's dropout recomputes switched off.
        Invalid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Head(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.fc, self.drop = nn.Linear(8, 8), nn.Dropout(0.3)

                def forward(self, x):
                    return self.drop(self.fc(x))

            class Net(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.head = Head()

                def forward(self, x):
                    return checkpoint(self.head, x, use_reentrant=False)

            def train(model, loader):
                for step, x in enumerate(loader):
                    model.train()
                    loss = model(x).sum()
                    if step % 10 == 0:
                        model.eval()
                        print(loss.item())
                    loss.backward()

            train(Net(), [])
            """,
            line=25,
            column=13,
            message_contains="`model.eval()` puts the module in eval mode after `model(...)` (line 23) and before "
            "backward (line 27), but the region `Net.forward` checkpoints (example.py:18) runs dropout (Net.head -> Head.drop",
        ),
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint

            def forward(self, x):
                cfg = {"scale": 2.0}
                y = checkpoint(self.scaled, x, cfg, use_reentrant=False)
                cfg["scale"] = 3.0
                return y
            """,
            line=5,
            column=9,
            message_contains="`cfg`, which the checkpointed region reads, is assigned an item after this call (line 6)",
        ),
        # A flag the checkpointed method reads, flipped later in the same forward.
        Invalid(
            """
            import torch.nn as nn
            from torch.utils.checkpoint import checkpoint

            class Block(nn.Module):
                def _attend(self, x):
                    return self.attn(x, causal=self.causal)

                def forward(self, x):
                    x = checkpoint(self._attend, x, use_reentrant=False)
                    self.causal = False
                    return x
            """,
            line=9,
            column=13,
            message_contains="`self.causal`",
        ),
        # A list captured by a lambda, appended to afterwards.
        Invalid(
            """
            from torch.utils.checkpoint import checkpoint

            def run(blocks, x):
                masks = []
                x = checkpoint(lambda t: blocks[len(masks)](t), x, use_reentrant=False)
                masks.append(None)
                return x
            """,
            line=5,
            column=9,
        ),
    ]


def _apart(function: cst.FunctionDef, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    """Whether two nodes sit in different branches of one `if` (its body and its `elif` /
    `else`, boltz's `if self.run_structure: checkpoint(...)` then `elif self.training:
    feats["coords"] = ...`): they never both run."""
    for node in descendants(function):
        if isinstance(node, cst.If) and node.orelse is not None:
            body, orelse = set(descendants(node.body)), set(descendants(node.orelse))
            if (first in body and second in orelse) or (second in body and first in orelse):
                return True
    return False


def _walk_statements(node: cst.CSTNode):
    """Every node of a function's own body (not of nested functions or classes)."""
    if isinstance(node, cst.Module):
        stack = list(node.body)
    else:
        stack = list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, (cst.ClassDef, cst.Lambda)) or (isinstance(current, cst.FunctionDef) and current is not node):
            continue
        stack.extend(child_nodes(current))


def _names_checkpoint(text: str) -> bool:
    return all(word in text for word in _SITE_REQUIRES) and any(word in text for word in _SITE_TRIGGERS)


def _mode_switch(call: cst.Call) -> tuple[str, bool] | None:
    """(receiver, training) for `net.eval()`, `net.train()`, `net.train(False)`, `net.train(mode=...)`
    with a literal; None for anything else."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("eval", "train"):
        return None
    receiver = dotted_text(func.value)
    if receiver is None:
        return None
    if func.attr.value == "eval":
        return (receiver, False) if not call.args else None
    if not call.args:
        return receiver, True
    value = call.args[0].value
    if len(call.args) == 1 and isinstance(value, cst.Name) and value.value in ("True", "False"):
        return receiver, value.value == "True"
    return None


@dataclass(frozen=True)
class _Watch:
    """Something a caller must leave alone until backward: a name it changes (or, for an
    object, any attribute below it), how the message names it, the checkpoint call's line."""

    target: str
    what: str
    line: int
    below: bool = False  # `cfg`: any `cfg.<attr> = ...`

    def matches(self, change: _Mutation) -> bool:
        if self.below:
            return change.how == "reassigned" and change.target.startswith(f"{self.target}.")
        return change.target == self.target


def _watched(
    call: cst.Call,
    reads: RecomputeReads,
    is_container: Callable[[cst.BaseExpression], bool],
    is_object: Callable[[cst.BaseExpression], bool],
) -> list[_Watch]:
    """What a caller must leave alone until backward: the containers (and config objects) it
    passes for the parameters the regions read, the attributes of the module it calls that
    they read (`net.blk.use_gelu`, `net.layers[*].use_gelu` for each layer)."""
    watched: list[_Watch] = []
    positional = [arg for arg in call.args if arg.keyword is None and not arg.star]
    for position, name, line in reads.parameters:
        keyword = next((arg for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)
        arg = keyword if keyword is not None else positional[position] if 0 <= position < len(positional) else None
        passed = dotted_text(arg.value) if arg is not None else None
        if passed is not None and is_container(arg.value):
            watched.append(_Watch(passed, f"it is passed as `{name}`, which", line))
        elif passed is not None and is_object(arg.value):
            watched.append(_Watch(passed, f"`{passed}` is passed as `{name}`, which", line, below=True))
    owner = dotted_text(call.func)
    if owner is not None:
        for attribute, line in reads.attributes:
            container, _, member = attribute.partition("[*].")
            what = f"`{member}` of each of `{container}`" if member else f"`{attribute}`"
            watched.append(_Watch(f"{owner}.{attribute}", what, line))
    return watched


def _attribute_changes(nodes: list[cst.CSTNode]) -> list[_Mutation]:
    """Changes made through attributes: assignments to attributes of objects other than
    `self` itself (`net.blk.use_gelu = False`, `self.model.act_mode = "relu"`; `layer.
    use_gelu = False` in `for layer in net.layers` is `net.layers[*].use_gelu`), and item
    assignments and mutating calls on containers held in attributes (`self.opts["t"] = 0.5`)."""
    loops = {
        node.target.value: f"{source}[*]"
        for node in nodes
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name) and (source := dotted_text(node.iter)) is not None
    }

    def change(expr: cst.BaseExpression, node: cst.CSTNode, how: str) -> _Mutation | None:
        name = dotted_text(expr)
        if name is None:
            return None
        root, _, rest = name.partition(".")
        if root in loops and rest:
            source = loops[root].removesuffix("[*]")
            return _Mutation(f"{loops[root]}.{rest}", node, how, f"`{name}` (each of `{source}`)")
        return _Mutation(name, node, how)

    found = []
    for node in nodes:
        if isinstance(node, (cst.Assign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if isinstance(target, cst.Attribute) and (written := change(target, node, "reassigned")) is not None:
                    if written.target.count(".") >= (2 if written.target.startswith("self.") else 1):
                        found.append(written)
                elif isinstance(target, cst.Subscript) and isinstance(target.value, cst.Attribute):
                    if (written := change(target.value, node, "assigned an item")) is not None:
                        found.append(written)
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in MUTATING_METHODS
            and isinstance(node.func.value, cst.Attribute)
            and (written := change(node.func.value, node, f"changed by `.{node.func.attr.value}()`")) is not None
        ):
            found.append(written)
    return found


def _containers(function: cst.FunctionDef) -> set[str]:
    """Names the function binds to a dict, list or set (a literal, a comprehension, or a
    container constructor), calls a container-only method on, or indexes with a string."""
    found: set[str] = set()
    for node in _walk_statements(function):
        if isinstance(node, cst.Assign) and _is_container(node.value):
            found |= {t.target.value for t in node.targets if isinstance(t.target, cst.Name)}
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in MUTATING_METHODS
            and isinstance(node.func.value, cst.Name)
        ):
            found.add(node.func.value.value)
        elif isinstance(node, cst.Subscript) and isinstance(node.value, cst.Name) and _string_key(node):
            found.add(node.value.value)  # `ctx["layer_idx"]`: no tensor is indexed by a string
    return found


def _string_key(subscript: cst.Subscript) -> bool:
    return len(subscript.slice) == 1 and isinstance(subscript.slice[0].slice, cst.Index) and isinstance(
        subscript.slice[0].slice.value, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
    )


def _is_container(value: cst.BaseExpression) -> bool:
    if isinstance(value, (cst.Dict, cst.List, cst.Set, cst.DictComp, cst.ListComp, cst.SetComp)):
        return True
    return isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value in CONTAINER_CONSTRUCTORS


def _mutations(function: cst.FunctionDef, containers: set[str]) -> list[_Mutation]:
    found: list[_Mutation] = []
    for node in _walk_statements(function):
        if isinstance(node, (cst.Assign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value in containers:
                    found.append(_Mutation(target.value.value, node, "assigned an item"))
                elif (
                    isinstance(target, cst.Attribute)
                    and isinstance(target.value, cst.Name)
                    and target.value.value == "self"
                ):
                    found.append(_Mutation(f"self.{target.attr.value}", node, "reassigned"))
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in MUTATING_METHODS
            and isinstance(node.func.value, cst.Name)
            and node.func.value.value in containers
        ):
            found.append(_Mutation(node.func.value.value, node, f"changed by `.{node.func.attr.value}()`"))
    return found


def _own_names(region: cst.Lambda | cst.FunctionDef) -> set[str]:
    """The parameters of a lambda or nested function, and the names a nested function binds."""
    params = region.params
    found = {p.name.value for p in (*params.posonly_params, *params.params, *params.kwonly_params)}
    found |= {p.name.value for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)}
    if isinstance(region, cst.FunctionDef):
        for node in _walk_statements(region):
            targets = node.targets if isinstance(node, cst.Assign) else ()
            found |= {t.target.value for t in targets if isinstance(t.target, cst.Name)}
            if isinstance(node, (cst.AugAssign, cst.For)) and isinstance(node.target, cst.Name):
                found.add(node.target.value)
    return found


def _names_read(region: cst.CSTNode) -> set[str]:
    found: set[str] = set()

    class Reader(cst.CSTVisitor):
        def visit_Name(self, name: cst.Name) -> None:
            found.add(name.value)

    walk(region.body if isinstance(region, (cst.Lambda, cst.FunctionDef)) else region, Reader())
    return found


def _self_reads(site: CheckpointSite, region: cst.CSTNode | None) -> set[str]:
    if region is None:
        return set()
    found: set[str] = set()

    class Reader(cst.CSTVisitor):
        def visit_Attribute(self, attribute: cst.Attribute) -> None:
            if isinstance(attribute.value, cst.Name) and attribute.value.value == "self":
                found.add(f"self.{attribute.attr.value}")

    walk(region.body if isinstance(region, (cst.Lambda, cst.FunctionDef)) else region, Reader())
    return found
