"""The project index served from its cache answers every project-wide query as the index
built from the files does, while loading only the facts those queries need."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from ckptlint.config import resolve_settings
from ckptlint.indexing import build_index

FIXTURES = Path(__file__).parent.parent / "fixtures"
# Answered from the files that hold such facts only (`ProjectIndex.files_with`).
QUERIES = ("fsdp_uses", "wrapped_classes", "checkpoint_wrappers", "forwarding", "forwarding_words", "checkpoint_aliases",
           "hf_checkpointing_calls", "deepspeed_checkpointing_wiring", "hands_on_deepspeed_configs")


PROJECTS = (".", "fsdp_llama", "hf_fsdp_trainer", "fsdp2_titan", "finetune_tf4", "projects/reexported_checkpoint",
            "projects/hydra_reentrancy", "deepspeed_sft", "megatron_ds")


@pytest.mark.parametrize("project", PROJECTS)
def test_cached_index_answers_like_a_fresh_one(tmp_path, project):
    shutil.copytree(FIXTURES, tmp_path / "fixtures")
    root = tmp_path / "fixtures" / project
    settings = dataclasses.replace(resolve_settings(root), cache_dir=tmp_path / "cache")
    fresh = build_index(root, settings, use_cache=False)
    build_index(root, settings)  # writes the cache
    cached = build_index(root, settings)
    assert cached.files_with is not None
    for query in QUERIES:
        assert getattr(cached, query) == getattr(fresh, query), query
    assert cached.option_defaults("use_reentrant") == fresh.option_defaults("use_reentrant")
    assert cached.fingerprint == fresh.fingerprint
    # The queries loaded only the files that hold such facts.
    assert set(cached.files._built) <= set().union(*cached.files_with.values())
    assert cached.training_arguments_classes == fresh.training_arguments_classes  # a full scan


def test_the_fixtures_hold_every_kind_of_cross_file_fact(tmp_path):
    """So that the test above compares non-empty answers."""
    seen = set()
    for project in PROJECTS:
        root = FIXTURES / project
        settings = dataclasses.replace(resolve_settings(root), cache_dir=tmp_path / "cache")
        seen.update(build_index(root, settings).files_with)
    assert seen == {
        "wraps", "fsdp", "checkpointing", "options", "forwarding", "checkpoint_imports", "reexports", "recomputes",
        "hf_checkpointing", "deepspeed_wiring", "deepspeed_consumers", "freezing",
    }


def test_a_file_linted_from_other_text_brings_its_own_cross_file_facts(tmp_path):
    """`with_file` (the text being linted, e.g. from stdin or an editor buffer) adds what
    that text holds to the project-wide queries, even when the index was served from cache."""
    root = tmp_path / "project"
    root.mkdir()
    (root / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (root / "model.py").write_text("import torch\n\nclass Block(torch.nn.Module):\n    pass\n")
    settings = dataclasses.replace(resolve_settings(root), cache_dir=tmp_path / "cache")
    build_index(root, settings)
    cached = build_index(root, settings)
    assert cached.fsdp_uses == ()
    wrapped = (
        "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n"
        "import torch\n\nclass Block(torch.nn.Module):\n    pass\n\nmodel = FSDP(Block())\n"
    )
    updated = cached.with_file("model.py", wrapped)
    assert [(use.path, use.line) for use in updated.fsdp_uses] == [("model.py", 7)]


def test_a_file_whose_extraction_raises_is_said_and_not_remembered(tmp_path, monkeypatch):
    """A bug in the extraction is not a limit: the run names the file, and the next run tries
    it again instead of serving it from the cache as a file without facts."""
    import ckptlint.model.file_facts.extraction as extraction

    (tmp_path / "pyproject.toml").write_text("[tool.ckptlint]\n")
    (tmp_path / "model.py").write_text("import torch.nn as nn\n\nclass Net(nn.Module):\n    pass\n")
    settings = dataclasses.replace(resolve_settings(tmp_path), cache_dir=tmp_path / "cache")

    def broken(text, relative_path, **_):
        raise AttributeError("'Attribute' object has no attribute 'func'")

    monkeypatch.setattr(extraction, "extract_facts", broken)
    index = build_index(tmp_path, settings, jobs=1)
    assert index.extraction_errors == (
        "model.py: internal error while indexing, its facts are missing (please report): "
        "AttributeError: 'Attribute' object has no attribute 'func'",
    )
    monkeypatch.undo()
    again = build_index(tmp_path, settings, jobs=1)
    assert again.extraction_errors == ()
    assert [c.name for c in again.files["model.py"].classes] == ["model.Net"]


def test_a_table_computed_from_some_kinds_of_files_is_kept_between_runs(tmp_path):
    """`checkpoint_aliases`, which every linted file asks, is computed once per state of the
    files that hold checkpoint imports and re-exports: a later run reads it without loading
    any facts; an edit elsewhere keeps it; an edit to one of those files, or a damaged
    table, computes it again."""
    shutil.copytree(FIXTURES / "projects" / "reexported_checkpoint", tmp_path / "project")
    root = tmp_path / "project"
    settings = dataclasses.replace(resolve_settings(root), cache_dir=tmp_path / "cache")
    expected = build_index(root, settings, use_cache=False).checkpoint_aliases
    assert expected["vision.utils.recompute"] == "torch.utils.checkpoint.checkpoint"
    assert build_index(root, settings).checkpoint_aliases == expected  # computed, stored

    served = build_index(root, settings)
    assert served.checkpoint_aliases == expected
    assert not served.files._built  # read from the store: no file's facts loaded

    (root / "vision" / "own_checkpoint.py").write_text("def checkpoint(model, path):\n    return path\n")
    served = build_index(root, settings)
    assert served.checkpoint_aliases == expected
    assert set(served.files._built) <= {"vision/own_checkpoint.py"}

    compat = root / "vision" / "utils" / "compat.py"
    compat.write_text(compat.read_text() + "again = torch.utils.checkpoint.checkpoint\n")
    recomputed = build_index(root, settings).checkpoint_aliases
    assert recomputed == build_index(root, settings, use_cache=False).checkpoint_aliases
    assert recomputed["vision.utils.compat.again"] == "torch.utils.checkpoint.checkpoint"

    [table] = (tmp_path / "cache").rglob("checkpoint_aliases.table")
    table.write_text('{"key": "x", "value": [')
    assert build_index(root, settings).checkpoint_aliases == recomputed
    assert build_index(root, settings).checkpoint_aliases == recomputed  # stored again, well-formed


def test_every_files_names_are_kept_file_by_file(tmp_path):
    """The names table (which files can name what: the call graph's) and the re-exports
    are made of every file's names, kept between runs file by file: a later run builds them
    without loading any facts, an edit loads the edited file's alone, and a damaged store
    or a deleted file gives what a fresh index does."""
    shutil.copytree(FIXTURES / "projects" / "reexported_checkpoint", tmp_path / "project")
    root = tmp_path / "project"
    settings = dataclasses.replace(resolve_settings(root), cache_dir=tmp_path / "cache")

    def answers(index):
        return dict(index.names_table), [index.names_of(path) for path in index.files], index.reexported_as(
            "vision.utils.compat.recompute"
        )

    expected = answers(build_index(root, settings, use_cache=False))
    assert expected[0] and any(expected[1]) and expected[2] == ["vision.utils.recompute"]
    assert answers(build_index(root, settings)) == expected  # computed, stored
    served = build_index(root, settings)
    assert answers(served) == expected
    assert not served.files._built

    added = root / "vision" / "added.py"
    added.write_text("from vision.utils import compat\n")
    served = build_index(root, settings)
    assert answers(served) == answers(build_index(root, settings, use_cache=False))
    assert set(served.files._built) == {"vision/added.py"}

    added.unlink()
    [table] = (tmp_path / "cache").rglob("names.table")
    table.write_text('{"key": "by-path", "value": {"vision/added.py": [')
    assert answers(build_index(root, settings)) == expected
    assert answers(build_index(root, settings)) == expected


def test_which_files_are_scripts_changes_only_with_the_set_of_scripts(tmp_path):
    """`S` (the scripts) and `T` (the top-level folders) change when that set does: a module
    added to a package changes the paths (`P`) but neither; a script added beside the
    training script changes `S`, a new top-level folder `T`; an edit that adds a class none."""
    root = tmp_path / "project"
    (root / "pkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text("[project]\nname = 'demo'\n")
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "model.py").write_text("import torch\n")
    (root / "train.py").write_text("from pkg.model import torch\n")
    settings = dataclasses.replace(resolve_settings(root), cache_dir=tmp_path / "cache")
    build_index(root, settings)

    def changed_now() -> set[str]:
        revision = build_index(root, settings).revision
        return {key for key in ("P", "S", "T") if revision.changed.get(key) == revision.number}

    (root / "pkg" / "layers.py").write_text("import torch\n")
    assert changed_now() == {"P"}
    (root / "finetune.py").write_text("import torch\n")
    assert changed_now() == {"P", "S"}
    (root / "tools").mkdir()
    (root / "tools" / "convert.py").write_text("import torch\n")
    assert changed_now() == {"P", "S", "T"}
    (root / "pkg" / "model.py").write_text("import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n")
    assert changed_now() == set()
