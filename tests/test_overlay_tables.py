"""An index with one file's text laid over it (`ProjectIndex.with_file`: an editor buffer, a
fix's next round) takes from the index below it every derived table the edit cannot change
(`ProjectIndex.inherited_table`), and answers exactly as an index that computed everything
itself: the tables, and the findings of the file linted with it."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from ckptlint.config import resolve_settings
from ckptlint.engine import lint_text
from ckptlint.indexing import build_index
from ckptlint.model.index import ProjectIndex, with_kinds
from ckptlint.model.project.reads import derived_tables

FIXTURES = Path(__file__).parent.parent / "fixtures"
PROJECTS = ("fsdp_llama", "hf_fsdp_trainer", "fsdp2_titan", "finetune_tf4", "projects/ddp_unused", "deepspeed_sft")
PER_PATH_TABLES = ("_names_by_path", "_defined_names")

FSDP_WRAP = (
    "\n\nfrom torch.distributed.fsdp import FullyShardedDataParallel as _Sharded\n\n"
    "def added_sharding(model):\n    return _Sharded(model)\n"
)
FSDP_AT_MODULE_LEVEL = "\n\nimport torch\nfrom torch.distributed.fsdp import FullyShardedDataParallel\n\nsharded = FullyShardedDataParallel(torch.nn.Linear(2, 2))\n"


def edits(text: str) -> dict[str, str]:
    """Edits as typing makes them: one that other files cannot observe, one that shifts
    every line, one that binds a new name, one that adds a cross-file fact."""
    lines = text.splitlines(keepends=True)
    body = next((i + 1 for i, line in enumerate(lines) if line.lstrip().startswith("def ") and line.rstrip().endswith(":")), None)
    found = {
        "comment": text + "\n# edited\n",
        "shifted": "import os\n" + text,
        "new function": text + "\n\ndef added_helper(model):\n    return model\n",
        "fsdp": text + FSDP_WRAP,
        "fsdp at module level": text + FSDP_AT_MODULE_LEVEL,
    }
    if body is not None:
        indent = lines[body][: len(lines[body]) - len(lines[body].lstrip())] if body < len(lines) and lines[body].strip() else "    "
        found["statement"] = "".join([*lines[:body], f"{indent}steps_seen = 0\n", *lines[body:]])
    return found


@pytest.fixture(scope="module")
def copied(tmp_path_factory):
    target = tmp_path_factory.mktemp("fixtures") / "fixtures"
    shutil.copytree(FIXTURES, target)
    return target


def indexes(copied: Path, project: str, tmp_path: Path):
    root = copied / project
    settings = dataclasses.replace(resolve_settings(root), cache_dir=tmp_path / "cache")
    build_index(root, settings)  # written to the cache: the indexes below are served from it, with a read log
    return root, settings, (lambda: build_index(root, settings))


@pytest.mark.parametrize("project", PROJECTS)
def test_an_overlay_inherits_only_tables_its_edit_leaves_unchanged(copied, tmp_path, project):
    root, settings, index = indexes(copied, project, tmp_path)
    base = index()
    assert base.read_log is not None
    tables = derived_tables(ProjectIndex)
    for name in tables:
        getattr(base, name)  # every table computed below, to be inherited where it can
    for name in PER_PATH_TABLES:
        getattr(base, name)
    inherited = recomputed = 0
    for path in sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts):
        relative = path.relative_to(root).as_posix()
        for what, text in edits(path.read_text()).items():
            overlay = base.with_file(relative, text)
            if overlay is base:
                continue
            fresh = index().with_file(relative, text)  # its base has computed nothing
            for name, table in tables.items():
                assert getattr(overlay, name) == getattr(fresh, name), (relative, what, name)
                if overlay.__dict__[table.slot] is base.__dict__[table.slot]:
                    inherited += 1
                else:
                    recomputed += 1
            for name in PER_PATH_TABLES:
                assert getattr(overlay, name) == getattr(fresh, name), (relative, what, name)
            assert overlay.files_with == fresh.files_with
    assert inherited and recomputed  # both ways taken


@pytest.mark.parametrize("project", PROJECTS)
def test_a_file_linted_over_an_index_that_computed_its_tables_is_linted_as_over_a_fresh_one(copied, tmp_path, project):
    """The editor's worker: one index, with edit after edit of its buffers laid over it."""
    root, settings, index = indexes(copied, project, tmp_path)
    kept = index()
    linted = 0
    for path in sorted(p for p in root.rglob("*.py") if "__pycache__" not in p.parts):
        for what, text in edits(path.read_text()).items():
            expected = lint_text(text, path, settings, project=index())
            assert lint_text(text, path, settings, project=kept) == expected, (path, what)
            linted += bool(expected.diagnostics)
    assert linted  # the edits keep findings to compare


def test_an_overlay_lists_the_file_under_the_kinds_of_its_new_facts_only(tmp_path):
    """A buffer that no longer wraps anything in FSDP is no longer one of the FSDP files."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "train.py").write_text("import torch\n" + FSDP_WRAP)
    settings = dataclasses.replace(resolve_settings(tmp_path), cache_dir=tmp_path / "cache")
    build_index(tmp_path, settings)
    index = build_index(tmp_path, settings)
    assert "train.py" in index.files_with["fsdp"]
    overlay = index.with_file("train.py", "import torch\n")
    assert "train.py" not in overlay.files_with.get("fsdp", ())
    assert overlay.fsdp_uses == ()
    assert with_kinds(None, "train.py", overlay.files["train.py"]) is None


def test_an_index_without_a_read_log_inherits_nothing(tmp_path):
    """Tables computed without their reads recorded cannot say what an edit changes."""
    (tmp_path / "train.py").write_text("import torch\n" + FSDP_WRAP)
    base = build_index(tmp_path, dataclasses.replace(resolve_settings(tmp_path), cache_dir=None), use_cache=False)
    assert base.read_log is None
    base.fsdp_uses
    overlay = base.with_file("train.py", "import torch\n" + FSDP_WRAP + "\n# edited\nx = 1\n")
    assert isinstance(overlay, ProjectIndex) and overlay is not base
    overlay.fsdp_uses
    assert overlay.__dict__["_tracked_fsdp_uses"] is not base.__dict__["_tracked_fsdp_uses"]


def test_an_edit_that_adds_the_projects_first_fsdp_use_is_seen_by_the_next_lint(tmp_path):
    """The editor's worker linted the buffer once (its index computed the FSDP tables from
    the file on disk); the buffer then wraps a model in FSDP: its reentrant checkpoint is
    now under FSDP."""
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    model = tmp_path / "model.py"
    text = (
        "import torch\nfrom torch.utils.checkpoint import checkpoint\n\n\n"
        "class Block(torch.nn.Module):\n    def forward(self, x):\n        return checkpoint(self.inner, x, use_reentrant=True)\n"
    )
    model.write_text(text)
    settings = dataclasses.replace(resolve_settings(tmp_path), cache_dir=tmp_path / "cache")
    build_index(tmp_path, settings)
    index = build_index(tmp_path, settings)
    assert [d.code for d in lint_text(text, model, settings, project=index).diagnostics] == []
    edited = lint_text(text + FSDP_AT_MODULE_LEVEL, model, settings, project=index)
    assert [(d.code, d.location.row) for d in edited.diagnostics] == [("CKPT002", 7)]


@pytest.mark.parametrize("project", PROJECTS[:3])
def test_a_new_files_overlay_answers_as_a_fresh_one(copied, tmp_path, project):
    """A buffer of a file not yet on disk: its part of the tables made file by file goes in
    its place among the paths."""
    root, settings, index = indexes(copied, project, tmp_path)
    base = index()
    for name in (*derived_tables(ProjectIndex), *PER_PATH_TABLES):
        getattr(base, name)
    for relative in ("aaa_first.py", "pkg_new/helpers.py", "zzz_last.py"):
        text = "import torch\n\ndef added_helper(model):\n    return model\n" + FSDP_AT_MODULE_LEVEL
        overlay, fresh = base.with_file(relative, text), index().with_file(relative, text)
        for name in (*derived_tables(ProjectIndex), *PER_PATH_TABLES):
            assert getattr(overlay, name) == getattr(fresh, name), (relative, name)
        assert list(overlay._names_by_path) == list(fresh._names_by_path)
