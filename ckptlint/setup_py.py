"""The requirements a setup.py passes to `setup()`, read from its syntax tree: never run.

What is followed: literal lists, tuples and `+` of them; names bound at module level (also
item by item, `extras["dev"] = ...`); and the Hugging Face idiom of one table of pinned
requirements (`_deps = ["torch>=2.6", ...]`, `deps = {name: requirement for ... in _deps}`)
read through `deps["torch"]` and a helper `deps_list("torch", ...)` returning
`[deps[name] for name in names]`. Anything computed otherwise (a function reading a
requirements file, as OpenMMLab's setup.py does) is skipped: those files are read directly.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from ckptlint.versions import parse_requirement_range

MAX_DEPTH = 12
Requirement = tuple[str, int]  # the string as written, and its line


def setup_call_arguments(tree: ast.Module) -> Iterator[tuple[list[Requirement], list[tuple[str, str, int]]]]:
    """For each `setup(...)` / `setuptools.setup(...)` call: its `install_requires`
    requirements and its `extras_require` (extra, requirement, line) triples."""
    module = _ModuleBindings(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = node.func
        name = function.id if isinstance(function, ast.Name) else function.attr if isinstance(function, ast.Attribute) else None
        if name != "setup":
            continue
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        install = module.strings(keywords.get("install_requires"))
        extras = [
            (extra, requirement, line)
            for extra, value in module.table(keywords.get("extras_require"))
            for requirement, line in module.strings(value)
        ]
        yield install, extras


class _ModuleBindings:
    def __init__(self, tree: ast.Module) -> None:
        self.names: dict[str, ast.expr] = {}
        self.items: dict[tuple[str, str], ast.expr] = {}  # name["key"] = value
        self.functions: dict[str, ast.FunctionDef] = {}
        for statement in tree.body:
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    self._bind(target, statement.value)
            elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
                self._bind(statement.target, statement.value)
            elif isinstance(statement, ast.FunctionDef):
                self.functions[statement.name] = statement

    def _bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.names[target.id] = value
        elif isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name):
            key = _constant_string(target.slice)
            if key is not None:
                self.items[target.value.id, key] = value

    def strings(self, node: ast.expr | None, depth: int = 0) -> list[Requirement]:
        """The requirement strings an expression evaluates to, as far as it can be read."""
        if node is None or depth > MAX_DEPTH:
            return []
        if isinstance(node, ast.Constant):
            return [(node.value, node.lineno)] if isinstance(node.value, str) else []
        if isinstance(node, ast.Name):
            return self.strings(self.names.get(node.id), depth + 1)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return self.strings(node.left, depth + 1) + self.strings(node.right, depth + 1)
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            found: list[Requirement] = []
            for element in node.elts:
                found.extend(self.strings(element.value if isinstance(element, ast.Starred) else element, depth + 1))
            return found
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            key = _constant_string(node.slice)
            return [] if key is None else self.strings(self._item(node.value.id, key, depth), depth + 1)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            return self._helper_call(node, depth)
        return []

    def table(self, node: ast.expr | None, depth: int = 0) -> list[tuple[str, ast.expr]]:
        """The (key, value) entries of a dict an expression evaluates to."""
        if depth > MAX_DEPTH:
            return []
        if isinstance(node, ast.Name):
            entries = self.table(self.names.get(node.id), depth + 1)
            known = {key for key, _ in entries}
            return entries + sorted(
                (key, value) for (name, key), value in self.items.items() if name == node.id and key not in known
            )
        if isinstance(node, ast.Dict):
            return [(key, value) for k, value in zip(node.keys, node.values) if (key := _constant_string(k)) is not None]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict":
            return [(k.arg, k.value) for k in node.keywords if k.arg]
        return []

    def _item(self, name: str, key: str, depth: int) -> ast.expr | None:
        if (name, key) in self.items:
            return self.items[name, key]
        bound = self.names.get(name)
        if isinstance(bound, ast.Dict):
            return dict(self.table(bound, depth + 1)).get(key)
        if isinstance(bound, ast.DictComp) and bound.generators:
            # {name: requirement for ... in _deps}: the requirement of that name in the table.
            wanted = parse_requirement_range(key)
            source = bound.generators[0].iter
            while isinstance(source, (ast.GeneratorExp, ast.ListComp)) and source.generators:
                source = source.generators[0].iter  # (re.findall(...)[0] for x in _deps)
            for requirement, line in self.strings(source, depth + 1):
                parsed = parse_requirement_range(requirement)
                if parsed is not None and wanted is not None and parsed.package == wanted.package:
                    constant = ast.Constant(requirement)
                    constant.lineno = line
                    return constant
        return None

    def _helper_call(self, call: ast.Call, depth: int) -> list[Requirement]:
        """`deps_list("torch", "peft")` where `def deps_list(*pkgs): return [deps[p] for p in pkgs]`."""
        function = self.functions.get(call.func.id)
        if function is None or not function.body or not isinstance(function.body[-1], ast.Return):
            return []
        returned = function.body[-1].value
        if not (
            isinstance(returned, ast.ListComp)
            and isinstance(returned.elt, ast.Subscript)
            and isinstance(returned.elt.value, ast.Name)
            and isinstance(returned.elt.slice, ast.Name)
        ):
            return []
        found: list[Requirement] = []
        for argument in call.args:
            key = _constant_string(argument)
            if key is not None:
                found.extend(self.strings(self._item(returned.elt.value.id, key, depth), depth + 1))
        return found


def _constant_string(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
