"""Incremental runs give a cold run's findings, byte for byte, after any sequence of edits.

Each case copies a fixture project, lints it once with a cache, then applies edits drawn
by `random.Random(seed)` (a fixed number of seeds, so every run draws the same sequences):
functions, classes and imports added or removed, defaults, bases and `use_reentrant`
values changed, FSDP wraps added, statements added in a method, files added, deleted and
renamed. After each edit the run with the cache (which re-lints only the files whose text
changed or whose recorded reads of the project index answer differently:
`ckptlint.model.project.reads`) must report exactly what a run without any cache does.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import random
import re
import shutil
from pathlib import Path

import pytest

from ckptlint.config import resolve_settings
from ckptlint.reporters.json_format import diagnostic_to_json
from ckptlint.runner import RunOptions, check_paths

FIXTURES = Path(__file__).parent.parent / "fixtures"
PROJECTS = (
    "fsdp_llama", "projects/fsdp_helpers", "projects/fsdp_two_wraps", "projects/forwarding",
    "projects/hf_crossfile", "projects/evaluated_reentrancy", "projects/chosen_impl",
    # The rules of the fourth round read DDP uses, launches, returned containers, frozen
    # producers and DeepSpeed wiring across files.
    "projects/ddp_unused", "projects/llava_towers", "projects/frozen_inputs", "deepspeed_sft",
)
SEEDS = range(2)
STEPS = 6

NEW_MODULE = '''import torch.utils.checkpoint as cp


def {name}(block, x):
    return cp.checkpoint(block, x, use_reentrant={flag})
'''
FSDP_WRAP = '''

def {name}(model):
    from functools import partial

    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

    return FSDP(model, auto_wrap_policy=partial(transformer_auto_wrap_policy, transformer_layer_cls={{object}}))
'''


def _python_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.py") if ".ckptlint_cache" not in p.parts)


def _definitions(text: str) -> list[ast.stmt]:
    return [node for node in ast.parse(text).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]


def _module_of(root: Path, path: Path) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")


class Editor:
    """Draws one edit of the project at a time; every edit leaves valid Python."""

    def __init__(self, root: Path, rng: random.Random) -> None:
        self.root, self.rng, self.count = root, rng, 0

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def edit(self) -> str:
        for _ in range(20):
            operation = self.rng.choice([
                self.add_function, self.remove_definition, self.add_class, self.add_import, self.flip_flag,
                self.change_default, self.change_base, self.add_statement, self.add_fsdp_wrap, self.add_file,
                self.delete_file, self.rename_file,
            ])
            done = operation()
            if done:
                return done
        return "nothing"

    def _pick(self) -> Path | None:
        files = _python_files(self.root)
        return self.rng.choice(files) if files else None

    def _write(self, path: Path, text: str) -> bool:
        try:
            ast.parse(text)
        except SyntaxError:
            return False
        path.write_text(text)
        return True

    def add_function(self) -> str | None:
        path = self._pick()
        name = self._name("helper")
        body = self.rng.choice([
            "    return x\n",
            "    import torch.utils.checkpoint as cp\n\n    return cp.checkpoint(x, 1)\n",
            "    import torch.utils.checkpoint as cp\n\n    return cp.checkpoint(x, 1, use_reentrant=True)\n",
        ])
        if path and self._write(path, path.read_text() + f"\n\ndef {name}(x):\n{body}"):
            return f"add function {name} to {path.name}"
        return None

    def remove_definition(self) -> str | None:
        path = self._pick()
        text = path.read_text() if path else ""
        definitions = _definitions(text) if path else []
        if not definitions:
            return None
        node = self.rng.choice(definitions)
        lines = text.splitlines(keepends=True)
        start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))]) - 1
        if self._write(path, "".join(lines[:start] + lines[node.end_lineno:])):
            return f"remove {node.name} from {path.name}"
        return None

    def add_class(self) -> str | None:
        path = self._pick()
        name = self._name("Block")
        text = (
            f"\n\nclass {name}(torch.nn.Module):\n    def forward(self, x):\n"
            "        import torch.utils.checkpoint as cp\n\n        return cp.checkpoint(self.inner, x)\n"
        )
        if path and self._write(path, "import torch\n" + path.read_text() + text):
            return f"add class {name} to {path.name}"
        return None

    def add_import(self) -> str | None:
        path, other = self._pick(), self._pick()
        if path is None or other is None or path == other:
            return None
        definitions = _definitions(other.read_text())
        if not definitions:
            return None
        name = self.rng.choice(definitions).name
        if self._write(path, f"from {_module_of(self.root, other)} import {name}\n" + path.read_text()):
            return f"import {name} into {path.name}"
        return None

    def _substitute(self, pattern: str, replace) -> str | None:
        candidates = [(p, m) for p in _python_files(self.root) for m in re.finditer(pattern, p.read_text())]
        if not candidates:
            return None
        path, match = self.rng.choice(candidates)
        text = path.read_text()
        new = text[: match.start()] + replace(match) + text[match.end():]
        return path.name if self._write(path, new) else None

    def flip_flag(self) -> str | None:
        done = self._substitute(r"use_reentrant\s*=\s*(True|False)", lambda m: m.group(0).replace(
            m.group(1), "False" if m.group(1) == "True" else "True"))
        return done and f"flip use_reentrant in {done}"

    def change_default(self) -> str | None:
        done = self._substitute(r"(\w+)(: \w+)? = (True|False)\b", lambda m: m.group(0).replace(
            m.group(3), "False" if m.group(3) == "True" else "True"))
        return done and f"change a default in {done}"

    def change_base(self) -> str | None:
        classes = [
            (p, node) for p in _python_files(self.root) for node in _definitions(p.read_text())
            if isinstance(node, ast.ClassDef)
        ]
        if len(classes) < 2:
            return None
        (path, node), (other_path, other) = self.rng.sample(classes, 2)
        text = path.read_text()
        lines = text.splitlines(keepends=True)
        header = lines[node.lineno - 1]
        base = other.name if other_path == path else "nn.Module"
        new_header = re.sub(r"class (\w+)(\([^)]*\))?:", f"class \\1({base}):", header, count=1)
        prefix = "" if other_path == path or "nn" in text else "from torch import nn\n"
        lines[node.lineno - 1] = new_header
        if self._write(path, prefix + "".join(lines)):
            return f"change the base of {node.name} in {path.name} to {base}"
        return None

    def add_statement(self) -> str | None:
        path = self._pick()
        text = path.read_text() if path else ""
        functions = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.FunctionDef)] if path else []
        if not functions:
            return None
        function = self.rng.choice(functions)
        first = function.body[0]
        lines = text.splitlines(keepends=True)
        indent = " " * first.col_offset
        statement = self.rng.choice(["_unused = 1", "self.flag = True", "x = x"])
        lines.insert(first.lineno - 1, f"{indent}{statement}\n")
        if self._write(path, "".join(lines)):
            return f"add `{statement}` in {function.name} of {path.name}"
        return None

    def add_fsdp_wrap(self) -> str | None:
        path = self._pick()
        name = self._name("shard")
        if path and self._write(path, path.read_text() + FSDP_WRAP.format(name=name)):
            return f"add an FSDP wrap {name} to {path.name}"
        return None

    def add_file(self) -> str | None:
        directory = self.rng.choice(sorted({p.parent for p in _python_files(self.root)} | {self.root}))
        name = self._name("added")
        path = directory / f"{name}.py"
        path.write_text(NEW_MODULE.format(name=name, flag=self.rng.choice(["True", "False"])))
        return f"add file {path.relative_to(self.root)}"

    def delete_file(self) -> str | None:
        path = self._pick()
        if path is None or path.name == "__init__.py":
            return None
        path.unlink()
        return f"delete {path.relative_to(self.root)}"

    def rename_file(self) -> str | None:
        path = self._pick()
        if path is None or path.name == "__init__.py":
            return None
        target = path.with_name(f"{self._name('renamed')}.py")
        path.rename(target)
        return f"rename {path.relative_to(self.root)} to {target.name}"


def findings(root: Path, settings, *, use_cache: bool) -> str:
    result = check_paths([root], settings, RunOptions(jobs=1, use_cache=use_cache))
    return json.dumps(
        {
            "findings": [diagnostic_to_json(d) for d in result.diagnostics],
            "hidden": result.hidden,
            "errors": result.internal_errors,
        },
        indent=2, sort_keys=True,
    )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("project", PROJECTS)
def test_incremental_runs_report_what_cold_runs_do(tmp_path, project, seed):
    root = tmp_path / "project"
    shutil.copytree(FIXTURES / project, root)
    if not (root / "pyproject.toml").exists():
        (root / "pyproject.toml").write_text('[project]\nname = "copy"\nversion = "0"\n')
    settings = dataclasses.replace(resolve_settings(root), cache_dir=tmp_path / "cache")
    findings(root, settings, use_cache=True)  # the cache the edits start from
    editor = Editor(root, random.Random(f"{project}:{seed}"))
    history = []
    for _ in range(STEPS):
        history.append(editor.edit())
        cold = findings(root, settings, use_cache=False)
        warm = findings(root, settings, use_cache=True)
        assert warm == cold, "after: " + "; ".join(history)


PYPROJECT = "[project]\nname = 'demo'\ndependencies = ['torch>=2.4']\n"
MODEL = '''
import torch.nn as nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def forward(self, x):
        return x


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(4))

    def forward(self, x):
        for block in self.blocks:
            x = checkpoint(block, x)
        return x
'''
# `train.py` names nothing of the model: what reaches `pkg/model.py` is the project's FSDP
# use alone (`q:fsdp_uses`).
TRAIN_FSDP = '''
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def main():
    return FSDP(nn.Linear(4, 4))
'''
TRAIN_PLAIN = '''
import torch.nn as nn
from torch.distributed.fsdp import FullyShardedDataParallel as FSDP


def main():
    return nn.Linear(4, 4)
'''


def test_an_edit_re_lints_exactly_the_files_whose_reads_it_changes(cli, make_project, record_calls):
    """The edited file is linted again; another file only when what its analysis read of
    the index answers differently: FSDP appearing in `train.py` re-lints the model it reaches
    (CKPT001 becomes CKPT002), a function nobody calls, a new module nobody imports or a
    statement in a `forward` re-lint nothing else. (An edit of the file holding the FSDP
    use re-lints the files it reaches: the reach reads that file's facts whole.)"""
    import ckptlint.runner

    root = make_project(
        {"pkg/__init__.py": "", "pkg/model.py": MODEL, "pkg/layers.py": "def helper(x):\n    return x\n",
         "train.py": TRAIN_PLAIN},
        pyproject=PYPROJECT,
    )
    linted = record_calls(ckptlint.runner, "check_file", lambda path, *rest: Path(path).as_posix())

    def lint() -> list[tuple]:
        from tests.conftest import json_findings

        linted.clear()
        return json_findings(cli(["--output-format", "json", "."], root), root)

    def edit(relative: str, text: str) -> None:
        (root / relative).write_text(text)

    assert [f[3] for f in lint()] == ["CKPT001"]
    assert lint() and sorted(linted) == []  # warm: nothing linted
    edit("pkg/layers.py", "def helper(x):\n    return x\n\n\ndef unused(x):\n    return x + 1\n")
    lint()
    assert sorted(linted) == ["pkg/layers.py"]
    edit("pkg/new_module.py", "def added(x):\n    y = x * 2\n    return y\n")
    lint()
    assert sorted(linted) == ["pkg/new_module.py"]
    edit("pkg/model.py", MODEL.replace("        return x\n", "        x = x + 0\n        return x\n", 1))
    assert [f[3] for f in lint()] == ["CKPT001"]
    assert sorted(linted) == ["pkg/model.py"]
    edit("train.py", TRAIN_FSDP)
    assert [f[3] for f in lint()] == ["CKPT002"]
    assert sorted(linted) == ["pkg/model.py", "train.py"]
    edit("train.py", TRAIN_PLAIN)
    assert [f[3] for f in lint()] == ["CKPT001"]
    assert sorted(linted) == ["pkg/model.py", "train.py"]


STAR_SOURCE = "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n"
STAR_USER = '''
from .blocks import *


class Tower(nn.Module):
    def forward(self, x):
        return checkpoint(self.block, x)
'''


def test_a_name_a_star_import_brings_follows_an_edit_of_the_module_it_comes_from(cli, make_project, record_calls):
    """`checkpoint` reaches `tower.py` through `from .blocks import *`: the call is torch's
    while `blocks.py` imports torch's, and no longer once `blocks.py` defines its own; the
    edit of `blocks.py` re-lints `tower.py`, whose analysis read what `blocks.py` binds."""
    import ckptlint.runner

    root = make_project(
        {"pkg/__init__.py": "", "pkg/blocks.py": STAR_SOURCE, "pkg/tower.py": STAR_USER}, pyproject=PYPROJECT
    )
    linted = record_calls(ckptlint.runner, "check_file", lambda path, *rest: Path(path).as_posix())

    def lint() -> list[tuple]:
        from tests.conftest import json_findings

        linted.clear()
        return json_findings(cli(["--output-format", "json", "."], root), root)

    assert [(f[0], f[1], f[3]) for f in lint()] == [("pkg/tower.py", 6, "CKPT001")]
    assert lint() and linted == []
    (root / "pkg/blocks.py").write_text("import torch.nn as nn\n\n\ndef checkpoint(fn, *args):\n    return fn(*args)\n")
    assert lint() == []
    # (Every file asks the table of checkpoint aliases, which `blocks.py` is in: all re-lint.)
    assert {"pkg/blocks.py", "pkg/tower.py"} <= set(linted)
    (root / "pkg/blocks.py").write_text(STAR_SOURCE)
    assert [(f[0], f[1], f[3]) for f in lint()] == [("pkg/tower.py", 6, "CKPT001")]


def test_a_function_added_to_a_star_imported_module_re_lints_no_star_importer(cli, make_project, record_calls):
    """What a star import is asked is what the imported module binds one name to: a new
    public function in `layers.py`, which no importer looks up, re-lints `layers.py` alone,
    not `tower.py` nor the package `__init__` that star-import it; a `checkpoint` it starts
    to import re-lints the importer, whose call becomes torch's."""
    import ckptlint.runner

    layers = "import torch.nn as nn\n\n\nclass Block(nn.Module):\n    pass\n"
    root = make_project(
        {
            "pkg/__init__.py": "from .layers import *\n",
            "pkg/layers.py": layers,
            "pkg/tower.py": STAR_USER.replace(".blocks", ".layers"),
        },
        pyproject=PYPROJECT,
    )
    linted = record_calls(ckptlint.runner, "check_file", lambda path, *rest: Path(path).as_posix())

    def lint() -> list[tuple]:
        from tests.conftest import json_findings

        linted.clear()
        return json_findings(cli(["--output-format", "json", "."], root), root)

    assert lint() == []
    (root / "pkg/layers.py").write_text(layers + "\n\ndef helper(x):\n    return x\n")
    assert lint() == []
    assert linted == ["pkg/layers.py"]
    (root / "pkg/layers.py").write_text("from torch.utils.checkpoint import checkpoint\n" + layers)
    assert [(f[0], f[1], f[3]) for f in lint()] == [("pkg/tower.py", 6, "CKPT001")]
    assert "pkg/tower.py" in linted


def test_a_module_added_beside_a_model_an_fsdp_script_reaches_re_lints_that_module_alone(cli, make_project, record_calls):
    """Which files an FSDP use reaches rests on which files are scripts and what they import
    (`fsdp_reach`, one table read by its key): a module added to the package, which is no
    script, leaves it as it was and re-lints nothing but itself; a second training script
    changes the reach (the first no longer reaches it), and the files that asked are linted
    again with the same findings."""
    root = make_project(
        {"pkg/__init__.py": "", "pkg/model.py": MODEL, "train.py": TRAIN_FSDP}, pyproject=PYPROJECT
    )
    linted, lint = _recorded_lint(cli, root, record_calls)
    assert [(f[0], f[3]) for f in lint()] == [("pkg/model.py", "CKPT002")]
    (root / "pkg/new_module.py").write_text("def added(x):\n    y = x * 2\n    return y\n")
    assert [(f[0], f[3]) for f in lint()] == [("pkg/model.py", "CKPT002")]
    assert linted == ["pkg/new_module.py"]
    (root / "finetune.py").write_text("def train(model, batch):\n    model(batch).sum().backward()\n")
    assert [(f[0], f[3]) for f in lint()] == [("pkg/model.py", "CKPT002")]
    assert "finetune.py" in linted and "pkg/model.py" in linted


def _recorded_lint(cli, root, record_calls):
    """The files `check_file` is called for, and a JSON lint of `root` that records them afresh."""
    import ckptlint.runner
    from tests.conftest import json_findings

    linted = record_calls(ckptlint.runner, "check_file", lambda path, *rest: Path(path).as_posix())

    def lint() -> list[tuple]:
        linted.clear()
        return json_findings(cli(["--output-format", "json", "."], root), root)

    return linted, lint


BASES = '''
import torch.nn as nn


class Stem(nn.Module):
    def forward(self, x):
        return x


class Block(nn.Module):
    def run(self, x):
        return x * 2
'''
SUBCLASS = '''
from torch.utils.checkpoint import checkpoint

from pkg.layers import Block


class Net(Block):
    def forward(self, x):
        return checkpoint(self.run, x)
'''


def test_a_statement_that_moves_a_base_class_down_re_lints_no_subclass_file(cli, make_project, record_calls):
    """`net.py`'s region runs `self.run`, a method of its base `Block` in `layers.py`: what it
    reads of `Block` is its name and bases (`cb:`), not its lines, so a statement added in
    `Stem.forward` above it re-lints `layers.py` alone; a base added to `Block`, which may
    define `run` instead, re-lints `net.py` too."""
    root = make_project({"pkg/__init__.py": "", "pkg/layers.py": BASES, "pkg/net.py": SUBCLASS}, pyproject=PYPROJECT)
    linted, lint = _recorded_lint(cli, root, record_calls)
    assert [(f[0], f[1], f[3]) for f in lint()] == [("pkg/net.py", 8, "CKPT001")]
    (root / "pkg/layers.py").write_text(BASES.replace("        return x\n", "        x = x + 0\n        return x\n", 1))
    assert [(f[0], f[1], f[3]) for f in lint()] == [("pkg/net.py", 8, "CKPT001")]
    assert linted == ["pkg/layers.py"]
    (root / "pkg/layers.py").write_text(BASES.replace("class Block(nn.Module)", "class Block(Stem)"))
    assert [(f[0], f[1], f[3]) for f in lint()] == [("pkg/net.py", 8, "CKPT001")]
    assert sorted(linted) == ["pkg/layers.py", "pkg/net.py"]
