"""Configuration options that decide reentrancy, read where a project declares them.

`checkpoint(f, x, use_reentrant=args.use_reentrant)` says nothing by itself; the dataclass
(`use_reentrant: bool = True`, `field(default=True)`; also `HfArgumentParser` dataclasses) or
the argparse argument (`add_argument("--use_reentrant", type=bool, default=True)`;
`action="store_true"` defaults to False, `"store_false"` to True) that the value comes from
does. Only options whose name mentions `reentrant` are kept.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ckptlint.model.facts import OptionDefault
from ckptlint.model.method_behaviour import dotted, keyword_argument


def dataclass_options(node: ast.ClassDef) -> Iterator[OptionDefault]:
    """`use_reentrant: bool = True` / `= field(default=True)` in a `@dataclass` class."""
    if not any((dotted(d.func if isinstance(d, ast.Call) else d) or "").endswith("dataclass") for d in node.decorator_list):
        return
    for statement in node.body:
        if not (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)):
            continue
        name = statement.target.id
        if "reentrant" not in name or statement.value is None:
            continue
        value = statement.value
        if isinstance(value, ast.Call) and (dotted(value.func) or "").endswith("field"):
            value = keyword_argument(value, "default")
        if isinstance(value, ast.Constant) and isinstance(value.value, bool):
            yield OptionDefault(name, value.value, statement.lineno, f"`{node.name}.{name}`")


def argparse_options(call: ast.Call) -> Iterator[OptionDefault]:
    """`parser.add_argument("--use_reentrant", ...)` with a known default."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "add_argument"):
        return
    flags = [a.value for a in call.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
    long = [flag for flag in flags if flag.startswith("--") and "reentrant" in flag]
    if not long:
        return
    destination = keyword_argument(call, "dest")
    name = destination.value if isinstance(destination, ast.Constant) else long[0][2:].replace("-", "_")
    action = keyword_argument(call, "action")
    default = keyword_argument(call, "default")
    if isinstance(default, ast.Constant) and isinstance(default.value, bool):
        value = default.value
    elif default is None and isinstance(action, ast.Constant) and action.value in ("store_true", "store_false"):
        value = action.value == "store_false"
    else:
        return
    yield OptionDefault(name, value, call.lineno, f"`{long[0]}`")
