"""Where the cache goes: at the project root, or, in a tree with no project marker, in the
one directory the runs start from, never in each directory linted."""

from __future__ import annotations

import json
from pathlib import Path

from ckptlint.config import ROOT_MARKERS

SOURCE = "import torch.utils.checkpoint as cp\ny = cp.checkpoint(f, x)\n"


def caches_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(".ckptlint_cache"))


def test_outside_any_project_the_cache_is_where_the_run_started(cli, tmp_path):
    scratch = tmp_path / "scratch"
    for relative in ("a/x.py", "b/deep/y.py", "c/z.ipynb"):
        (scratch / relative).parent.mkdir(parents=True, exist_ok=True)
    (scratch / "a/x.py").write_text(SOURCE)
    (scratch / "b/deep/y.py").write_text(SOURCE)
    (scratch / "c/z.ipynb").write_text(
        json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": SOURCE}], "metadata": {}, "nbformat": 4})
    )
    assert not any((directory / marker).exists() for directory in (scratch, *scratch.parents) for marker in ROOT_MARKERS)
    runs = [["a/x.py"], ["b/deep"], ["c/z.ipynb"], ["a", "b"], ["."]]
    outputs = [cli([*run, "--output-format", "json"], cwd=scratch) for run in runs]
    assert [len(json.loads(result.stdout)) for result in outputs] == [1, 1, 1, 2, 3]
    assert caches_under(scratch) == [".ckptlint_cache"]
    # The runs share it: the warm run of a file linted before reads the cached result.
    stored = [
        path
        for file in (scratch / ".ckptlint_cache").glob("*/*.json")
        if not file.name.startswith(("index-", "facts-", "walk-"))
        for path in json.loads(file.read_text())["files"]
    ]
    assert sorted(Path(p).relative_to(scratch).as_posix() for p in set(stored)) == ["a/x.py", "b/deep/y.py", "c/z.ipynb"]
    # `ckptlint clean` from there removes that one cache.
    cleaned = cli(["clean", "a"], cwd=scratch)
    assert cleaned.exit_code == 0 and caches_under(scratch) == []


def test_in_a_project_the_cache_is_at_its_root(cli, make_project):
    root = make_project({"src/pkg/model.py": SOURCE})
    cli(["model.py"], cwd=root / "src" / "pkg")
    assert caches_under(root) == [".ckptlint_cache"]
