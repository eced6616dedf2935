"""What the checkpointed callee of a site accepts, and small libcst helpers CKPT032 compares
branches with: a function's parameters as the project model summarised them (`Callee`), a
node's code, whether one node holds another, the calls under a node."""

from __future__ import annotations

from dataclasses import dataclass

from ckptlint.lazy_libcst import cst

from ckptlint.analysis.cst_walk import child_nodes, walk
from ckptlint.model.form.summary import FunctionSummary, Parameter
from ckptlint.model.library.third_party_signatures import LibrarySignature


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
