"""The shape of the code, read from the source tree with `ast` (nothing is imported): the
model imports nothing of the rule side, and ckptlint's own modules import each other without
a cycle.

Every import statement counts, wherever it is written: at the top, inside `if
TYPE_CHECKING:` and inside a function body. A cycle that only exists "for the type
checker" or "at call time" is still two modules that cannot be read, tested or moved apart.
Relative imports are resolved; `from package import name` is an import of the module
`package.name` when there is one, else of `package`. The implicit import of a module's parent
packages is not counted (their `__init__` holds no code that imports back).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the `tomli` dependency of Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent

# Nothing under the model imports the rule side: the model answers, the rules and the recipe
# checks ask.
MODEL = "ckptlint.model"
NOT_FOR_THE_MODEL = ("ckptlint.analysis", "ckptlint.recipes", "ckptlint.rules")
# Outside itself the model imports only these leaves of ckptlint.
MODEL_MAY_IMPORT = ("ckptlint.versions", "ckptlint.types", "ckptlint.lazy_libcst")

# The model's layers, leaf first, each a package of `ckptlint.model` (or, for the top, the
# modules named): a module imports from its own layer or one below it, never from one above
# (docs/architecture.md says what each holds). Every module of the model is in one; a new
# top-level module is placed here.
MODEL_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("syntax", ("syntax",)),  # reading source text: CPython's `ast`, recipe documents, shell scripts
    ("form", ("form",)),  # the summary form: expressions, function summaries, abstract values, branches
    ("library", ("library",)),  # third-party behaviour as data, one module per library
    ("file_facts", ("file_facts",)),  # one file's text to its facts: the fact families and their extraction
    ("project", ("project",)),  # every file's facts, the call graph, the reach of FSDP uses, the queries
    ("evaluation", ("evaluation",)),  # the evaluator and what it answers across files
    ("questions", ("index", "recompute_reads", "script_models")),  # what the rules ask
)


def model_layer(module: str) -> int | None:
    """The rank of the layer a module of the model is in (its package's, or its own)."""
    if not module.startswith(MODEL + "."):
        return None
    name = module[len(MODEL) + 1 :]
    for rank, (_, members) in enumerate(MODEL_LAYERS):
        if any(name == member or name.startswith(member + ".") for member in members):
            return rank
    return None


@dataclass(frozen=True)
class Import:
    importer: str  # the importing module
    path: Path  # its file
    line: int
    written: str  # the absolute dotted name the statement names (`a.b.c`, `a.b` + name `c`)
    module: str | None  # the project module that is, None for another distribution's


def package_dirs(root: Path) -> dict[str, Path]:
    """Package name -> its folder, as pyproject.toml installs them (`ckptlint.rules` is
    `rules/`)."""
    settings = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    return {package: root / folder for package, folder in settings["package-dir"].items()}


def project_modules(root: Path) -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, whether it is a package's `__init__`), for every module the
    package folders hold."""
    folders = package_dirs(root)
    found: dict[str, tuple[Path, bool]] = {}
    for package, folder in folders.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if any(part in ("__pycache__",) for part in parts):
                continue
            name = ".".join([package, *parts])
            # A folder installed as a package of its own (`rules/`) is not also this one's.
            if any(other != package and name.startswith(other + ".") and other.startswith(package + ".") for other in folders):
                continue
            if parts[-1] == "__init__":
                found[name.rpartition(".")[0]] = (path, True)
            else:
                found[name] = (path, False)
    return found


def _containing(name: str, modules: Mapping[str, object]) -> str | None:
    """The project module `name` is, or is in (`a.b.c` for the function `c` of module `a.b`)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports(root: Path) -> list[Import]:
    """Every import statement of the project's modules, wherever it is written."""
    modules = project_modules(root)
    roots = {name.split(".")[0] for name in modules}
    found = []
    for importer, (path, is_package) in modules.items():
        package = importer if is_package else importer.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                written = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                written = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names
                ]
            else:
                continue
            for name in dict.fromkeys(written):
                if name.split(".")[0] in roots:
                    found.append(Import(importer, path, node.lineno, name, _containing(name, modules)))
    return found


def import_graph(found: Iterable[Import]) -> dict[str, dict[str, Import]]:
    """Importer -> {imported project module: the first statement importing it}."""
    graph: dict[str, dict[str, Import]] = {}
    for imported in found:
        edges = graph.setdefault(imported.importer, {})
        if imported.module is not None and imported.module != imported.importer:
            edges.setdefault(imported.module, imported)
    return graph


@dataclass(frozen=True)
class Cycle:
    modules: tuple[str, ...]  # a group of modules that import each other (a strongly connected component)
    chain: tuple[Import, ...]  # the shortest chain of imports from its first module back to itself

    def describe(self, root: Path) -> str:
        modules = " -> ".join([self.chain[0].importer, *(statement.module for statement in self.chain)])
        where = "; ".join(f"{s.path.relative_to(root)}:{s.line} imports {s.written}" for s in self.chain)
        group = f"\n    the group: {', '.join(self.modules)}" if len(self.modules) > len(self.chain) else ""
        return f"{modules}\n    ({where}){group}"


def cycles(graph: Mapping[str, Mapping[str, Import]]) -> list[Cycle]:
    """One cycle for each group of modules that import each other."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(module: str) -> None:  # Tarjan's algorithm
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in sorted(graph.get(module, {})):
            if imported not in index:
                connect(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            connect(module)
    return [Cycle(tuple(component), _shortest_cycle(component, graph)) for component in sorted(components)]


def _shortest_cycle(component: list[str], graph: Mapping[str, Mapping[str, Import]]) -> tuple[Import, ...]:
    start, members = component[0], set(component)
    came_by: dict[str, Import] = {}
    frontier = [start]
    while frontier:  # breadth first, inside the component, back to `start`
        following = []
        for module in frontier:
            for imported, statement in sorted(graph.get(module, {}).items()):
                if imported not in members or imported in came_by:
                    continue
                came_by[imported] = statement
                if imported == start:
                    chain = [statement]
                    while chain[0].importer != start:
                        chain.insert(0, came_by[chain[0].importer])
                    return tuple(chain)
                following.append(imported)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover - a component has one


def forbidden_model_imports(found: Iterable[Import], root: Path) -> list[str]:
    return [
        f"{imported.path.relative_to(root)}:{imported.line}: {imported.importer} imports {imported.written}"
        for imported in found
        if (imported.importer == MODEL or imported.importer.startswith(MODEL + "."))
        and any(imported.written == side or imported.written.startswith(side + ".") for side in NOT_FOR_THE_MODEL)
    ]


def layer_violations(found: Iterable[Import], modules: Iterable[str], root: Path) -> list[str]:
    """Model modules in no layer, imports from a higher layer, and imports of ckptlint
    outside the model but its leaves."""
    model = sorted(m for m in modules if m.startswith(MODEL + "."))  # (`ckptlint.model` itself holds no code)
    problems = [f"{module} is in no layer of MODEL_LAYERS" for module in model if model_layer(module) is None]
    for imported in found:
        below = model_layer(imported.importer)
        if below is None or imported.module is None:
            continue
        where = f"{imported.path.relative_to(root)}:{imported.line}: {imported.importer}"
        above = model_layer(imported.module)
        if above is not None and above > below:
            problems.append(f"{where} ({MODEL_LAYERS[below][0]}) imports {imported.module} ({MODEL_LAYERS[above][0]})")
        elif above is None and imported.module != MODEL and imported.module not in MODEL_MAY_IMPORT:
            problems.append(f"{where} imports {imported.module}, outside the model")
    return problems


# The checks on this tree.


def test_the_model_imports_nothing_of_the_rule_side():
    bad = forbidden_model_imports(imports(ROOT), ROOT)
    if bad:
        pytest.fail(f"{len(bad)} model imports of {', '.join(NOT_FOR_THE_MODEL)}:\n" + "\n".join(bad), pytrace=False)


def test_the_model_imports_down_its_layers():
    problems = layer_violations(imports(ROOT), project_modules(ROOT), ROOT)
    if problems:
        pytest.fail(f"{len(problems)} layering problems in the model:\n" + "\n".join(problems), pytrace=False)


def test_no_import_cycle():
    found = cycles(import_graph(imports(ROOT)))
    if found:
        pytest.fail(f"{len(found)} import cycles:\n" + "\n".join(cycle.describe(ROOT) for cycle in found), pytrace=False)


# The checks themselves, on a small tree with the faults they look for.


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-dir = { "ckptlint" = "ckptlint", "ckptlint.rules" = "rules" }\n'
    )
    for relative, text in {"ckptlint/__init__.py": "", "ckptlint/model/__init__.py": "", "rules/__init__.py": "", **files}.items():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text(text)
    return tmp_path


def test_the_checks_find_model_imports_of_the_rule_side_wherever_written(tmp_path):
    root = _tree(tmp_path, {
        "ckptlint/analysis/__init__.py": "",
        "ckptlint/analysis/branches.py": "",
        "rules/some_rule.py": "",
        "ckptlint/model/top.py": "from ckptlint.analysis.branches import Conditions\n",
        "ckptlint/model/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ckptlint.rules import some_rule\n",
        "ckptlint/model/late.py": "def f():\n    from ..analysis import branches\n",
        "ckptlint/model/plain.py": "import ckptlint.recipes.shell\n",
        "ckptlint/model/fine.py": "from ckptlint.model import top\nimport ast\n",
    })  # fmt: skip
    bad = forbidden_model_imports(imports(root), root)
    assert [line.split(": ", 1)[1] for line in bad] == [
        "ckptlint.model.late imports ckptlint.analysis.branches",
        "ckptlint.model.plain imports ckptlint.recipes.shell",
        "ckptlint.model.top imports ckptlint.analysis.branches",
        "ckptlint.model.typed imports ckptlint.rules.some_rule",
    ]


def test_the_checks_find_cycles_through_type_checking_and_function_imports(tmp_path):
    root = _tree(tmp_path, {
        "ckptlint/model/a.py": "from ckptlint.model.b import B\n",
        "ckptlint/model/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ckptlint.model.c import C\n",
        "ckptlint/model/c.py": "def f():\n    from . import a\n",
        "ckptlint/model/d.py": "from ckptlint.model import a\n",
        "ckptlint/x.py": "from ckptlint.rules.r import R\n",
        "rules/r.py": "from ckptlint import x\n",
    })  # fmt: skip
    found = cycles(import_graph(imports(root)))
    assert [[statement.importer for statement in cycle.chain] for cycle in found] == [
        ["ckptlint.model.a", "ckptlint.model.b", "ckptlint.model.c"],
        ["ckptlint.rules.r", "ckptlint.x"],
    ]
    assert found[1].describe(root).startswith("ckptlint.rules.r -> ckptlint.x -> ckptlint.rules.r\n    (rules/r.py:1")


def test_the_layer_check_finds_an_import_upwards_and_a_module_in_no_layer():
    modules = project_modules(ROOT)
    upwards = Import(f"{MODEL}.syntax.ast_walk", ROOT / "ckptlint/model/syntax/ast_walk.py", 1, f"{MODEL}.index", f"{MODEL}.index")
    outside = Import(f"{MODEL}.form.summary", ROOT / "ckptlint/model/form/summary.py", 2, "ckptlint.config", "ckptlint.config")
    problems = layer_violations([*imports(ROOT), upwards, outside], [*modules, f"{MODEL}.unplaced"], ROOT)
    assert problems == [
        f"{MODEL}.unplaced is in no layer of MODEL_LAYERS",
        f"ckptlint/model/syntax/ast_walk.py:1: {MODEL}.syntax.ast_walk (syntax) imports {MODEL}.index (questions)",
        f"ckptlint/model/form/summary.py:2: {MODEL}.form.summary imports ckptlint.config, outside the model",
    ]
