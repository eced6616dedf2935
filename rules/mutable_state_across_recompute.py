from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from ckptlint.analysis.checkpoint_sites import SITE_REQUIRES, SITE_TRIGGERS, CheckpointSite, SiteKind
from ckptlint.analysis.cst_walk import child_nodes, walk
from ckptlint.rule import Invalid, Rule, Valid

# Methods only containers have (tensors have none of them): a call of one mutates the object.
MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add", "discard", "remove"}
)
CONTAINER_CONSTRUCTORS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "deque"})


@dataclass(frozen=True)
class _Mutation:
    target: str  # `state`, or `self.flag`
    node: cst.CSTNode
    how: str


class MutableStateAcrossRecompute(Rule):
    """A non-tensor value the checkpointed region reads is changed before backward.

    ## What it does
    Finds, in the function that calls `checkpoint`, a change made *after* the call to a
    value the region reads that is not a tensor:

    - a dict, list or set passed as a checkpoint argument, or captured by the checkpointed
      lambda / nested function, and then mutated (`state["k"] = v`, `cache.append(...)`,
      `cfg.update(...)`);
    - a `self.<attribute>` that the checkpointed callable reads (a lambda, a nested function,
      or `self.<method>`), reassigned later in the same function.

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
    reentrant implementation picks the new value up there. `tests/test_closure_rules.py`
    re-measures both.
    """

    code = "CKPT031"
    name = "mutable-state-across-recompute"
    message = "a value the checkpointed region reads is changed after the checkpoint call"
    triggers = SITE_TRIGGERS
    reached_through_aliases = True  # torch's checkpoint under another module's name
    requires = SITE_REQUIRES

    def __init__(self, context) -> None:
        super().__init__(context)
        self._functions: list[cst.FunctionDef] = []
        self._site_function: dict[cst.Call, cst.FunctionDef] = {}
        self._classes: list[cst.ClassDef] = []
        self._site_class: dict[cst.Call, cst.ClassDef] = {}

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append(node)

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._functions.append(node)

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()

    def visit_Call(self, node: cst.Call) -> None:
        if self._functions:
            self._site_function[node] = self._functions[-1]
        if self._classes:
            self._site_class[node] = self._classes[-1]

    def visit_checkpoint_site(self, site: CheckpointSite) -> None:
        function = self._site_function.get(site.node)
        if site.kind is not SiteKind.CALL or function is None:
            return
        containers = _containers(function)
        read = self._region_reads(site, function) & (containers | {n for n in _self_reads(site, self._region(site))})
        if not read:
            return
        call_end = self.context.position(site.node).end
        for mutation in _mutations(function, containers):
            position = self.context.position(mutation.node).start
            if mutation.target in read and (position.line, position.column) > (call_end.line, call_end.column):
                self.report(
                    site.node,
                    f"`{mutation.target}`, which the checkpointed region reads, is {mutation.how} after this call "
                    f"(line {position.line}): the recomputation in backward sees the changed value, so gradients "
                    "silently differ from the forward pass; pass a copy, or change it only after backward",
                )
                return

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
            names |= _names_read(region)
            names |= _self_reads(site, region)
        return names

    valid = [
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


def _walk_statements(node: cst.CSTNode):
    """Every node of a function's own body (not of nested functions or classes)."""
    stack = list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []
    while stack:
        current = stack.pop()
        yield current
        if isinstance(current, (cst.ClassDef, cst.Lambda)) or (isinstance(current, cst.FunctionDef) and current is not node):
            continue
        stack.extend(child_nodes(current))


def _containers(function: cst.FunctionDef) -> set[str]:
    """Names the function binds to a dict, list or set (a literal, a comprehension, or a
    container constructor), or calls a container-only method on."""
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
    return found


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
