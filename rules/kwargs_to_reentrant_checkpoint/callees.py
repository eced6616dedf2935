"""What the checkpointed callee of a site accepts, and small libcst helpers CKPT032 compares
branches with: a function's parameters as the project model summarised them (`Callee`), the
functions a checkpoint call may call (`checkpointed_callees`), a node's code, whether one
node holds another, the calls under a node."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.cst_walk import child_nodes, walk
from ckptlint.model.library.open_clip import instance_versions
from ckptlint.model.form.summary import FunctionSummary, Parameter
from ckptlint.model.library.third_party_signatures import LibrarySignature, forward_signatures
from ckptlint.model.form.values import FunctionRef, Instance

if TYPE_CHECKING:
    from ckptlint.rule import FileContext


@dataclass(frozen=True)
class Callee:
    """A function checkpoint calls, as the project model summarised it (or, for a library
    block, as the table of third-party signatures holds it)."""

    name: str
    parameters: tuple[Parameter, ...]  # without `self`
    where: str = ""  # ` (pkg/layers.py)` when defined in another file

    @classmethod
    def of(cls, summary: FunctionSummary, *, skip_self: bool) -> Callee:
        parameters = summary.parameters
        if skip_self and parameters and parameters[0].kind == "positional":
            parameters = parameters[1:]
        return cls(summary.name.rsplit(".", 1)[-1], parameters)

    @classmethod
    def of_library(cls, signature: LibrarySignature) -> Callee:
        """A library class's `forward` from the table of signatures, named with its class
        and the versions it holds for."""
        return cls(f"{signature.cls.rsplit('.', 1)[-1]}.forward", signature.parameters, f" ({signature.versions})")

    def accepts(self, keyword: str) -> bool:
        return any(p.kind == "**" for p in self.parameters) or any(
            p.name == keyword and p.kind in ("positional", "keyword") for p in self.parameters
        )

    def signature(self) -> str:
        shown: list[str] = []
        starred = any(p.kind == "*" for p in self.parameters)
        for parameter in self.parameters:
            if parameter.kind == "keyword" and not starred:
                shown.append("*")
                starred = True
            prefix = {"*": "*", "**": "**"}.get(parameter.kind, "")
            default = f"={shown_default(parameter.default)}" if parameter.default is not None else ""
            shown.append(f"{prefix}{parameter.name}{default}")
        return ", ".join(shown)


def shown_default(expr: tuple) -> str:
    """A default value as written, where the summary keeps it simply."""
    if expr[0] == "const":
        return repr(expr[1])
    if expr[0] == "name":
        return expr[1]
    if expr[0] == "attr":
        return f"{shown_default(expr[1])}.{expr[2]}"
    return "..."


def checkpointed_callees(values, context: FileContext) -> list[Callee]:
    """The functions checkpoint will call with a site's inputs, from what its function
    argument evaluates to (`values`), through the project model (any file): a function,
    `self.<method>`, the function a factory returns (`create_custom_forward(module)`), or a
    module's `forward` (`self.block`, a loop variable over `self.blocks`), or a library
    block's `forward` in each version the project may run (`model/library/third_party_signatures.py`).
    Empty when any of them is not known."""
    denotation = context.project.denotation
    found: list[Callee] = []
    for value in denotation.runs(values):
        callee = None
        if isinstance(value, FunctionRef):
            summary = denotation.summary(value.name)
            bound = value.frame is not None and value.frame.self_instance is not None and value.frame.function == value.name
            callee = Callee.of(summary, skip_self=bound) if summary is not None else None
        elif isinstance(value, Instance) and context.project.class_named(value.cls) is not None:
            forward = denotation.method(value.cls, "forward")
            callee = Callee.of(forward, skip_self=True) if forward is not None else None
        elif isinstance(value, Instance):
            # A library block (open_clip's `ResidualAttentionBlock`): its `forward` in
            # each version the project may run, from the table. A block found through
            # what a library model holds (`model/library/open_clip.py`) exists in some versions
            # only; where the project runs none of them, it is not there.
            held_in = instance_versions(value)
            if held_in is not None and not context.versions.could_be(held_in):
                continue
            signatures = [
                signature for signature in forward_signatures(value.cls, context.versions)
                if held_in is None or signature.versions.overlaps(held_in)
            ]
            if not signatures:
                return []
            found.extend(Callee.of_library(signature) for signature in signatures)
            continue
        if callee is None:
            return []
        path = context.project.path_of(value.name if isinstance(value, FunctionRef) else value.cls)
        if path is not None and path != context.relative_path:
            callee = replace(callee, where=f" ({path})")
        found.append(callee)
    return list(dict.fromkeys(found))


def is_literal(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.SimpleString, cst.Integer, cst.Float)) or (
        isinstance(expr, cst.Name) and expr.value in ("None", "True", "False")
    )


def code_of(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def contains(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    pending = [tree]
    while pending:
        current = pending.pop()
        if current is node:
            return True
        pending.extend(child_nodes(current))
    return False


def calls_in(tree: cst.CSTNode) -> list[cst.Call]:
    calls: list[cst.Call] = []

    class Collector(cst.CSTVisitor):
        def visit_Call(self, call: cst.Call) -> None:
            calls.append(call)

    walk(tree, Collector())
    return calls
