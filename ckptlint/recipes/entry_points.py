"""What a launch script's Python entry point does with the arguments it is given.

Read with `ast` (the entry point is not imported): whether it is a LLaMA-Factory or axolotl
entry point (their defaults differ), and whether it builds the checkpointing kwargs from one
of its own argument fields: `gradient_checkpointing_kwargs={"use_reentrant":
model_args.use_reentrant}` with `use_reentrant: bool = field(default=True)` in a dataclass of
the script. The recipe's value for that field, or else the dataclass default, then decides.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from ckptlint.recipes.setups import Flavor

GC_KWARGS = "gradient_checkpointing_kwargs"


@dataclass(frozen=True)
class EntryPoint:
    flavor: Flavor | None
    # (field name, default) of the argument that becomes `use_reentrant`.
    reentrant_field: tuple[str, bool] | None


def read_entry_point(text: str) -> EntryPoint | None:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    flavor = None
    fields: dict[str, object] = {}
    used: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for module in modules:
                if module.startswith("llamafactory"):
                    flavor = Flavor.LLAMA_FACTORY
                elif module.startswith("axolotl"):
                    flavor = Flavor.AXOLOTL
        elif isinstance(node, ast.ClassDef):
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    fields[statement.target.id] = _default(statement.value)
        elif isinstance(node, ast.keyword) and node.arg == GC_KWARGS:
            used.extend(_reentrant_fields(node.value))
        elif isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Attribute) and target.attr == GC_KWARGS for target in node.targets
        ):
            used.extend(_reentrant_fields(node.value))
    reentrant_field = None
    names = set(used)
    if len(names) == 1:
        name = names.pop()
        default = fields.get(name)
        if isinstance(default, bool):
            reentrant_field = (name, default)
    return EntryPoint(flavor, reentrant_field)


def _default(value: ast.expr | None) -> object:
    """A dataclass field's default: `= True` or `= field(default=True, ...)`."""
    if isinstance(value, ast.Constant):
        return value.value
    if isinstance(value, ast.Call):
        for keyword in value.keywords:
            if keyword.arg == "default" and isinstance(keyword.value, ast.Constant):
                return keyword.value.value
    return None


def _reentrant_fields(value: ast.expr) -> list[str]:
    """`{"use_reentrant": args.name}` or `dict(use_reentrant=args.name)`: ["name"]."""
    found = None
    if isinstance(value, ast.Dict):
        for key, item in zip(value.keys, value.values):
            if isinstance(key, ast.Constant) and key.value == "use_reentrant":
                found = item
    elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict":
        found = next((k.value for k in value.keywords if k.arg == "use_reentrant"), None)
    if isinstance(found, ast.Attribute):
        return [found.attr]
    return []
