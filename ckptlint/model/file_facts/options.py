"""Configuration options that decide reentrancy, read where a project declares them.

`checkpoint(f, x, use_reentrant=args.use_reentrant)` says nothing by itself; the dataclass
(`use_reentrant: bool = True`, `field(default=True)`; also `HfArgumentParser` dataclasses) or
the argparse argument (`add_argument("--use_reentrant", type=bool, default=True)`;
`action="store_true"` defaults to False, `"store_false"` to True), or the YAML configuration
a Hydra / OmegaConf project loads (`model: {use_reentrant: true}`) that the value comes from
does. Only options whose name mentions `reentrant` are kept.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ckptlint.model.file_facts.facts import FileFacts, OptionDefault
from ckptlint.model.file_facts.launch_scripts import accelerate_fsdp_version, launch_script_facts
from ckptlint.model.syntax.file_kinds import SHELL_SUFFIXES
from ckptlint.model.syntax.call_syntax import dotted, keyword_argument


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


def configuration_facts(text: str, relative: str, module: str) -> FileFacts:
    """The facts of a YAML configuration file: its boolean options whose key mentions
    `reentrant` (`model.use_reentrant: true`), under the key's last part, the attribute a
    loaded config has (`cfg.model.use_reentrant`), and the FSDP version of an accelerate
    config (`ckptlint.model.file_facts.launch_scripts`). A file that cannot be read as YAML holds none
    (its lint, if it is a recipe, says why). A launch script's facts are its `accelerate
    launch` commands."""
    if relative.lower().endswith(SHELL_SUFFIXES):
        return launch_script_facts(text, module)
    reentrant, accelerate = "reentrant" in text, "distributed_type" in text
    if not (reentrant or accelerate):
        return FileFacts(module)
    from ckptlint.model.syntax.recipe_documents import RecipeSyntaxError, parse_recipe

    try:
        documents = parse_recipe(text, relative, is_json=False)
    except RecipeSyntaxError:
        return FileFacts(module)
    options = tuple(
        OptionDefault(setting.key[-1], setting.value, setting.key_span.start.row, f"`{setting.dotted}: {str(setting.value).lower()}`")
        for document in documents
        for setting in document.settings.values()
        if "reentrant" in setting.key[-1] and isinstance(setting.value, bool)
    ) if reentrant else ()
    return FileFacts(module, options=options, accelerate_fsdp=accelerate_fsdp_version(documents) if accelerate else 0)


# How code reads a flag from the environment, and the strings that mean true.
_TRUE_STRINGS = frozenset({"1", "true", "yes", "y", "on", "t"})


def environment_options(node: ast.Assign) -> Iterator[OptionDefault]:
    """`USE_REENTRANT = os.environ.get("USE_REENTRANT", "1") == "1"` (also `os.getenv`,
    `bool(int(...))`, `.lower() in ("1", "true")`, `strtobool`): the value when the variable
    is not set."""
    for target in node.targets:
        if isinstance(target, ast.Name) and "reentrant" in target.id.lower():
            value, variable = environment_default(node.value)
            if value is not None:
                yield OptionDefault(target.id, value, node.lineno, f"`{target.id}` read from the environment, `{variable}` unset")


def environment_default(expr: ast.AST) -> tuple[bool | None, str]:
    """The truth of an expression reading an environment variable, when it is not set, and
    the variable's name; (None, "") when that is not known."""
    value, variable = _unset_value(expr)
    if isinstance(value, bool):
        return value, variable
    return None, ""


def _unset_value(expr: ast.AST):
    if isinstance(expr, ast.Call):
        name = dotted(expr.func) or ""
        if name in ("os.environ.get", "os.getenv", "environ.get", "getenv") and len(expr.args) == 2:
            default, key = expr.args[1], expr.args[0]
            if isinstance(default, ast.Constant) and isinstance(key, ast.Constant):
                return default.value, str(key.value)
            return None, ""
        inner, variable = _unset_value(expr.args[0]) if expr.args else (None, "")
        if inner is None:
            if isinstance(expr.func, ast.Attribute) and expr.func.attr in ("lower", "strip", "upper"):
                inner, variable = _unset_value(expr.func.value)
                if isinstance(inner, str):
                    return getattr(inner, expr.func.attr)(), variable
            return None, ""
        short = name.rsplit(".", 1)[-1]
        if short == "int" and isinstance(inner, str) and inner.strip().lstrip("-").isdigit():
            return int(inner), variable
        if short == "bool":
            return bool(inner), variable
        if short == "strtobool" and isinstance(inner, str):
            return inner.lower() in _TRUE_STRINGS, variable
        return None, ""
    if isinstance(expr, ast.Compare) and len(expr.ops) == 1:
        left, variable = _unset_value(expr.left)
        right = expr.comparators[0]
        if left is None:
            return None, ""
        if isinstance(expr.ops[0], (ast.Eq, ast.NotEq)) and isinstance(right, ast.Constant):
            return (left == right.value) == isinstance(expr.ops[0], ast.Eq), variable
        if isinstance(expr.ops[0], (ast.In, ast.NotIn)) and isinstance(right, (ast.Tuple, ast.List, ast.Set)):
            members = {e.value for e in right.elts if isinstance(e, ast.Constant)}
            return (left in members) == isinstance(expr.ops[0], ast.In), variable
    return None, ""
