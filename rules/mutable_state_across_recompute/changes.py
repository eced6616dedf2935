"""What CKPT031 counts as a change of a value a checkpointed region reads, after the
checkpoint call: item assignment and container-only methods on containers the function
builds, reassignments of `self`'s and other objects' attributes, `eval()` / `train()`; and
which statements are a function's own, and which two sit in branches that never both run."""

from __future__ import annotations

from dataclasses import dataclass

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.model_expressions import written_name
from ckptlint.analysis.cst_walk import child_nodes, descendants

# Methods only containers have (tensors have none of them): a call of one mutates the object.
MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "update", "setdefault", "pop", "popitem", "clear", "add", "discard", "remove"}
)
CONTAINER_CONSTRUCTORS = frozenset({"dict", "list", "set", "defaultdict", "OrderedDict", "deque"})


@dataclass(frozen=True)
class Mutation:
    target: str  # `state`, or `self.flag`; `net.layers[*].flag` for `layer.flag` in `for layer in net.layers`
    node: cst.CSTNode
    how: str
    written: str = ""  # for the message, where the target is not what the code says (`layer.flag`)


def walk_statements(node: cst.CSTNode):
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


def apart(function: cst.FunctionDef, first: cst.CSTNode, second: cst.CSTNode) -> bool:
    """Whether two nodes sit in different branches of one `if` (its body and its `elif` /
    `else`, boltz's `if self.run_structure: checkpoint(...)` then `elif self.training:
    feats["coords"] = ...`): they never both run."""
    for node in descendants(function):
        if isinstance(node, cst.If) and node.orelse is not None:
            body, orelse = set(descendants(node.body)), set(descendants(node.orelse))
            if (first in body and second in orelse) or (second in body and first in orelse):
                return True
    return False


def mode_switch(call: cst.Call) -> tuple[str, bool] | None:
    """(receiver, training) for `net.eval()`, `net.train()`, `net.train(False)`, `net.train(mode=...)`
    with a literal; None for anything else."""
    func = call.func
    if not isinstance(func, cst.Attribute) or func.attr.value not in ("eval", "train"):
        return None
    receiver = written_name(func.value)
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


def attribute_changes(nodes: list[cst.CSTNode]) -> list[Mutation]:
    """Changes made through attributes: assignments to attributes of objects other than
    `self` itself (`net.blk.use_gelu = False`, `self.model.act_mode = "relu"`; `layer.
    use_gelu = False` in `for layer in net.layers` is `net.layers[*].use_gelu`), and item
    assignments and mutating calls on containers held in attributes (`self.opts["t"] = 0.5`)."""
    loops = {
        node.target.value: f"{source}[*]"
        for node in nodes
        if isinstance(node, cst.For) and isinstance(node.target, cst.Name) and (source := written_name(node.iter)) is not None
    }

    def change(expr: cst.BaseExpression, node: cst.CSTNode, how: str) -> Mutation | None:
        name = written_name(expr)
        if name is None:
            return None
        root, _, rest = name.partition(".")
        if root in loops and rest:
            source = loops[root].removesuffix("[*]")
            return Mutation(f"{loops[root]}.{rest}", node, how, f"`{name}` (each of `{source}`)")
        return Mutation(name, node, how)

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


def container_names(function: cst.FunctionDef) -> set[str]:
    """Names the function binds to a dict, list or set (a literal, a comprehension, or a
    container constructor), calls a container-only method on, or indexes with a string."""
    found: set[str] = set()
    for node in walk_statements(function):
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


def mutations_in(function: cst.FunctionDef, containers: set[str]) -> list[Mutation]:
    found: list[Mutation] = []
    for node in walk_statements(function):
        if isinstance(node, (cst.Assign, cst.AugAssign)):
            targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            for target in targets:
                if isinstance(target, cst.Subscript) and isinstance(target.value, cst.Name) and target.value.value in containers:
                    found.append(Mutation(target.value.value, node, "assigned an item"))
                elif (
                    isinstance(target, cst.Attribute)
                    and isinstance(target.value, cst.Name)
                    and target.value.value == "self"
                ):
                    found.append(Mutation(f"self.{target.attr.value}", node, "reassigned"))
        elif (
            isinstance(node, cst.Call)
            and isinstance(node.func, cst.Attribute)
            and node.func.attr.value in MUTATING_METHODS
            and isinstance(node.func.value, cst.Name)
            and node.func.value.value in containers
        ):
            found.append(Mutation(node.func.value.value, node, f"changed by `.{node.func.attr.value}()`"))
    return found
